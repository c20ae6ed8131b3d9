package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/policy"
)

// An operator lists an account's users and removes one (`runos users
// remove`, the console). Removing ends the user's access at once, by the
// same path as an operator ending their sessions: every live session ends
// (as "removed", which their daemons show), their devices are deleted and
// so leave every gateway by the same push, their groups in the account go
// and the account's gateways are told. Their record stays, with no
// account and no password, so that their daemons still learn why; an
// identity provider that still lets them in creates them again at their
// next sign-in (identity.go): keeping them out is the provider's job.
//
// A user who also belongs to accounts the caller does not remove them
// from keeps their sessions and devices for those (as access_scope.go
// scopes a revoke): their devices leave this account's clusters at once.

// errRemoved answers a session ended because an operator removed its user.
var errRemoved = &api.Error{Status: 401, Code: api.CodeUnauthorized,
	Message: "an operator removed you from your RunOS account, so RunOS ended this session and removed this device",
	Hint:    "ask your administrator if this is a mistake"}

func (s *Server) handleUsers(w http.ResponseWriter, r *http.Request, p *principal) {
	out := []api.User{}
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		aid, _, err := accountAction(rd, p, r.PathValue("aid"), policy.ManageUsers)
		if err != nil {
			return err
		}
		// Two reads whatever the number of users, not one per user.
		us, err := rd.Users(aid)
		if err != nil {
			return err
		}
		gs, err := rd.Groups(aid)
		if err != nil {
			return err
		}
		of := groupsOfMembers(gs)
		for _, u := range us {
			out = append(out, api.User{Email: u.Email, Operator: u.OperatorOf(aid), Groups: nonNil(of[strings.ToLower(u.Email)]), Password: u.PasswordHash != ""})
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

func (s *Server) handleRemoveUser(w http.ResponseWriter, r *http.Request, p *principal) {
	email, err := policy.CheckEmail(strings.TrimSpace(r.PathValue("email")))
	if err != nil {
		writeError(w, errInvalid("user: %v", err))
		return
	}
	now := s.now()
	var out api.RemovedUser
	err = s.update(r.Context(), func(tx store.Writer) error {
		aid, how, err := accountAction(tx, p, r.PathValue("aid"), policy.ManageUsers)
		if err != nil {
			return err
		}
		u, err := tx.User(email)
		if errors.Is(err, store.ErrNotFound) || err == nil && !u.InAccount(aid) {
			return errNotFound("no user %s in %s (list them: runos users list)", email, aid)
		} else if err != nil {
			return err
		}
		if p.kind == kindUser && strings.EqualFold(p.user.Email, u.Email) {
			return errConflict(fmt.Sprintf("you cannot remove yourself from %s", aid), "ask another operator of the account, or use its operator token")
		}
		if how == byRule {
			if err := mayRemoveByRule(tx, aid, u); err != nil {
				return err
			}
		}
		if out, err = s.removeUser(tx, aid, u, now); err != nil {
			return err
		}
		return s.record(tx, r, p, audit.Entry{AIDs: []string{aid}, Kind: audit.UserRemoved, Target: u.Email, Outcome: removedOutcome(out)})
	})
	if err != nil {
		s.fail(w, r, fmt.Errorf("remove user %s: %w", email, err))
		return
	}
	s.log.Info("user removed by an operator", "user", out.Email, "account", out.AID, "sessions", out.Sessions, "by", p.actor().String())
	s.afterSessionsClosed()
	writeJSON(w, http.StatusOK, out)
}

// removeUser takes u out of aid inside tx: their sessions and devices
// (or, when they belong to other accounts too, their devices out of aid's
// clusters only), their groups there, the account's gateways told.
func (s *Server) removeUser(tx store.Writer, aid string, u model.User, now time.Time) (api.RemovedUser, error) {
	out := api.RemovedUser{Email: u.Email, AID: aid, Sessions: []string{}, Devices: []string{}, Elsewhere: len(u.Accounts) > 1}
	gs, err := tx.UserGroups(aid, u.Email)
	if err != nil {
		return out, err
	}
	out.Groups = nonNil(gs)
	ss, err := tx.LiveSessionsOfUser(u.Email, now)
	if err != nil {
		return out, err
	}
	devs, err := tx.Devices(store.DeviceFilter{AIDs: []string{aid}, User: u.Email})
	if err != nil {
		return out, err
	}
	if out.Elsewhere {
		x := newReach(tx, []string{aid})
		for _, d := range devs {
			cids, _, err := x.cutFromMine(tx, d)
			if err != nil {
				return out, err
			}
			if len(cids) > 0 {
				out.Cut = append(out.Cut, d.ID)
			}
		}
		for _, sess := range ss {
			tx.Touch(hub.Session(sess.ID)) // its cached principal still names aid among its accounts
		}
	} else {
		for _, sess := range ss {
			if err := closeSession(tx, sess, model.SessionRemoved, now); err != nil {
				return out, err
			}
			out.Sessions = append(out.Sessions, sess.ID)
		}
		for _, d := range devs {
			if err := deleteDevice(tx, d); err != nil {
				return out, fmt.Errorf("delete device %s: %w", d.ID, err)
			}
			out.Devices = append(out.Devices, d.ID)
		}
		// Nothing left to ask the provider about: a new sign-in makes a new grant.
		if err := tx.DeleteIdentityGrant(u.Email); err != nil && !errors.Is(err, store.ErrNotFound) {
			return out, err
		}
	}
	if err := tx.RemoveUserFromAccount(aid, u.Email); err != nil {
		return out, err
	}
	return out, touchGateways(tx, aid) // its groups changed: the policy's subjects with them
}

// removedOutcome says what removeUser did, for the audit entry.
func removedOutcome(out api.RemovedUser) string {
	list := func(ss []string) string {
		if len(ss) == 0 {
			return "none"
		}
		return strings.Join(ss, ", ")
	}
	if out.Elsewhere {
		return fmt.Sprintf("removed from %s; groups left: %s; devices off its clusters: %s; sessions kept (also a user of other accounts)",
			out.AID, list(out.Groups), list(out.Cut))
	}
	return fmt.Sprintf("removed from %s; sessions ended: %s; devices removed: %s; groups left: %s",
		out.AID, list(out.Sessions), list(out.Devices), list(out.Groups))
}
