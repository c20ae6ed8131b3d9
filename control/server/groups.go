package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/policy"
)

// An account's groups of users, which its policy's rules name
// (`runos groups`): created empty, members added and removed by operators
// and the users a manage-users rule lets, each change audited and pushed
// to the account's gateways (and policy:<aid>), since a member's reach
// changes with it.

func (s *Server) handleGroups(w http.ResponseWriter, r *http.Request, p *principal) {
	out := []api.Group{}
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		aid, _, err := accountAction(rd, p, r.PathValue("aid"), policy.ManageUsers)
		if err != nil {
			return err
		}
		gs, err := rd.Groups(aid)
		for _, g := range gs {
			out = append(out, api.Group{Name: g.Name, Members: g.Members})
		}
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// groupDoc reads one group back after a change.
func groupDoc(rd store.Reader, aid, name string) (api.Group, error) {
	gs, err := rd.Groups(aid)
	for _, g := range gs {
		if g.Name == name {
			return api.Group{Name: g.Name, Members: g.Members}, nil
		}
	}
	if err == nil {
		err = errNotFound("no group %s in %s (list them: runos groups list)", name, aid)
	}
	return api.Group{}, err
}

// changeGroup runs one change of a group in a transaction with its audit
// entry and push; fn says what it did, for the entry. A change of members
// (members true) by a manage-users rule stays off the groups an operate
// rule names (accountwide.go).
func (s *Server) changeGroup(w http.ResponseWriter, r *http.Request, p *principal, name string, members bool, status int, fn func(tx store.Writer, aid string) (string, error)) {
	var out api.Group
	err := s.update(r.Context(), func(tx store.Writer) error {
		aid, how, err := accountAction(tx, p, r.PathValue("aid"), policy.ManageUsers)
		if err != nil {
			return err
		}
		if members && how == byRule {
			if err := mayChangeGroupByRule(tx, aid, name); err != nil {
				return err
			}
		}
		did, err := fn(tx, aid)
		if err != nil {
			return err
		}
		if out, err = groupDoc(tx, aid, name); err != nil {
			return err
		}
		if err := touchGateways(tx, aid); err != nil {
			return err
		}
		return s.record(tx, r, p, audit.Entry{AIDs: []string{aid}, Kind: audit.GroupChanged, Target: name, Outcome: did})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, status, out)
}

func (s *Server) handleCreateGroup(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.CreateGroupRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	name := strings.TrimSpace(req.Name)
	if err := policy.CheckGroupName(name); err != nil {
		writeError(w, errInvalid("name: %v", err))
		return
	}
	s.changeGroup(w, r, p, name, false, http.StatusCreated, func(tx store.Writer, aid string) (string, error) {
		if err := tx.PutGroup(aid, name); errors.Is(err, store.ErrExists) {
			return "", errConflict(fmt.Sprintf("group %s already exists in %s", name, aid), "add members: runos groups add "+name+" EMAIL")
		} else if err != nil {
			return "", err
		}
		return "group " + name + " created", nil
	})
}

// memberChange reads the group and member of a member's request.
func memberChange(r *http.Request, email string) (group, member string, e *api.Error) {
	group = r.PathValue("name")
	if err := policy.CheckGroupName(group); err != nil {
		return "", "", errInvalid("group: %v", err)
	}
	member, err := policy.CheckEmail(strings.TrimSpace(email))
	if err != nil {
		return "", "", errInvalid("member: %v", err)
	}
	return group, member, nil
}

func (s *Server) handleAddMember(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.AddMemberRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	group, member, e := memberChange(r, req.Email)
	if e != nil {
		writeError(w, e)
		return
	}
	s.changeGroup(w, r, p, group, true, http.StatusOK, func(tx store.Writer, aid string) (string, error) {
		switch err := tx.PutGroupMember(aid, group, member); {
		case errors.Is(err, store.ErrNotFound):
			return "", errNotFound("no group %s in %s (create it: runos groups create %s)", group, aid, group)
		case errors.Is(err, store.ErrExists):
			return "", errConflict(fmt.Sprintf("%s is already a member of %s", member, group), "")
		case err != nil:
			return "", err
		}
		return member + " added to " + group, nil
	})
}

func (s *Server) handleRemoveMember(w http.ResponseWriter, r *http.Request, p *principal) {
	group, member, e := memberChange(r, r.PathValue("email"))
	if e != nil {
		writeError(w, e)
		return
	}
	s.changeGroup(w, r, p, group, true, http.StatusOK, func(tx store.Writer, aid string) (string, error) {
		if err := tx.DeleteGroupMember(aid, group, member); errors.Is(err, store.ErrNotFound) {
			return "", errNotFound("%s is not a member of group %s in %s (list them: runos groups list)", member, group, aid)
		} else if err != nil {
			return "", err
		}
		return member + " removed from " + group, nil
	})
}
