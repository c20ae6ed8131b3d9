package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/policy"
)

// An account's access policy (issue 23): operators, and users a set-policy
// rule lets, read, set and test the document; control/policy parses,
// validates and decides; the store keeps it; a join is decided against it
// (join.go's refusal). Every change is in the audit log and touches
// policy:<aid> for those who enforce it.

// accountPolicy is the account's document in force, parsed (nil: the
// account has none, and everyone may connect).
func accountPolicy(rd store.Reader, aid string) (*policy.Policy, model.Policy, error) {
	doc, err := rd.Policy(aid)
	if errors.Is(err, store.ErrNotFound) {
		return nil, model.Policy{AID: aid}, nil
	} else if err != nil {
		return nil, doc, err
	}
	// It was validated when set; a cluster deleted since only makes its
	// rules match nothing, so it is parsed, not validated, again.
	p, err := policy.Parse([]byte(doc.Document))
	if err != nil {
		return nil, doc, fmt.Errorf("policy version %d of %s in the store: %w", doc.Version, aid, err)
	}
	return p, doc, nil
}

// accountUser reads a user of aid (404 for anyone else, another
// account's user included).
func accountUser(rd store.Reader, aid, email string) (model.User, error) {
	if email == "" {
		return model.User{}, errInvalid("user: say whose access (--user EMAIL)")
	}
	u, err := rd.User(email)
	if isStoreNotFound(err) || err == nil && !u.InAccount(aid) {
		return model.User{}, errNotFound("no user %s in %s", email, aid)
	}
	return u, err
}

// subject is a user as the account's policy sees them.
func subject(rd store.Reader, aid string, u model.User) (policy.Subject, error) {
	groups, err := rd.UserGroups(aid, u.Email)
	return policy.Subject{User: u.Email, Groups: groups, Operator: u.OperatorOf(aid)}, err
}

// known is what a document of the account may name.
func known(rd store.Reader, aid string) (policy.Known, error) {
	var k policy.Known
	cs, err := rd.Clusters([]string{aid})
	if err != nil {
		return k, err
	}
	for _, c := range cs {
		k.Clusters = append(k.Clusters, c.CID)
	}
	gs, err := rd.Groups(aid)
	for _, g := range gs {
		k.Groups = append(k.Groups, g.Name)
	}
	return k, err
}

// errPolicyInvalid answers a document that does not parse or validate:
// every bad line in Details, the first in the message.
func errPolicyInvalid(err error) *api.Error {
	var details []string
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, e := range joined.Unwrap() {
			details = append(details, e.Error())
		}
	} else {
		details = []string{err.Error()}
	}
	msg := "invalid policy: " + details[0]
	if len(details) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(details)-1)
	}
	return &api.Error{Status: http.StatusBadRequest, Code: api.CodePolicyInvalid, Message: msg, Details: details,
		Hint: "fix the lines named and set the document again"}
}

func policyDoc(m model.Policy) api.Policy {
	return api.Policy{AID: m.AID, Version: m.Version, Document: m.Document, SetBy: m.SetBy, SetAt: m.SetAt}
}

func (s *Server) handlePolicy(w http.ResponseWriter, r *http.Request, p *principal) {
	var out api.Policy
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		aid, _, err := accountAction(rd, p, r.PathValue("aid"), policy.SetPolicy)
		if err != nil {
			return err
		}
		_, doc, err := accountPolicy(rd, aid)
		out = policyDoc(doc)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleSetPolicy(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.SetPolicyRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	next, err := policy.Parse([]byte(req.Document))
	if err != nil {
		writeError(w, errPolicyInvalid(err))
		return
	}
	var out api.Policy
	err = s.update(r.Context(), func(tx store.Writer) error {
		aid, _, err := accountAction(tx, p, r.PathValue("aid"), policy.SetPolicy)
		if err != nil {
			return err
		}
		k, err := known(tx, aid)
		if err != nil {
			return err
		}
		if err := next.Validate(k); err != nil {
			return errPolicyInvalid(err)
		}
		current, _, err := accountPolicy(tx, aid)
		if err != nil {
			return err
		}
		if err := policy.CheckNewer(current, next); err != nil {
			return errConflict(err.Error(), "runos policy get > policy.txt; edit it, raise its version line; runos policy set policy.txt")
		}
		m := model.Policy{AID: aid, Version: next.Version, Document: req.Document, SetBy: p.actor().String(), SetAt: s.now()}
		if err := tx.PutPolicy(m); err != nil {
			return err
		}
		out = policyDoc(m)
		if err := touchGateways(tx, aid); err != nil {
			return err
		}
		return s.record(tx, r, p, audit.Entry{AIDs: []string{aid}, Kind: audit.PolicySet, Target: aid,
			Outcome: fmt.Sprintf("policy version %d set: %d group(s), %d rule(s)", next.Version, len(next.Groups), len(next.Rules))})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("policy set", "aid", out.AID, "version", out.Version)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleTestPolicy(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.PolicyTestRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	q, err := policy.ParseQuery(strings.TrimSpace(req.To))
	if err != nil {
		writeError(w, errInvalid("to: %v", err))
		return
	}
	var out api.PolicyDecision
	err = s.st.View(r.Context(), func(rd store.Reader) error {
		aid, _, err := accountAction(rd, p, r.PathValue("aid"), policy.SetPolicy)
		if err != nil {
			return err
		}
		u, err := accountUser(rd, aid, strings.TrimSpace(req.User))
		if err != nil {
			return err
		}
		if c, err := rd.Cluster(q.Cluster); isStoreNotFound(err) || err == nil && c.AID != aid {
			return errNotFound("no cluster %s in %s (list them: runos clusters list)", q.Cluster, aid)
		} else if err != nil {
			return err
		}
		pol, _, err := accountPolicy(rd, aid)
		if err != nil {
			return err
		}
		sub, err := subject(rd, aid, u)
		d := pol.Decide(sub, q)
		out = api.PolicyDecision{Allow: d.Allow, Reason: d.Reason}
		if d.Rule != nil {
			out.Line, out.Rule = d.Rule.Line, d.Rule.String()
		}
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// mayJoin decides whether the caller may connect to the cluster under its
// account's policy: nil, or the refusal to answer and its audit entry
// (written by the caller in a change of its own, since the join's rolls
// back).
func (s *Server) mayJoin(rd store.Reader, p *principal, c model.Cluster, d model.Device) (*api.Error, *audit.Entry, error) {
	pol, _, err := accountPolicy(rd, c.AID)
	if err != nil || pol == nil {
		return nil, nil, err
	}
	sub, err := subject(rd, c.AID, p.user)
	if err != nil {
		return nil, nil, err
	}
	dec := pol.Decide(sub, policy.Query{Cluster: c.CID})
	if dec.Allow {
		return nil, nil, nil
	}
	groups := "in no group"
	if len(sub.Groups) > 0 {
		groups = "in group(s) " + strings.Join(slices.Sorted(slices.Values(sub.Groups)), ", ")
	}
	// On a deny the decision's reason is "no rule lets …": the message says
	// it once, with the policy's version.
	e := errForbidden(fmt.Sprintf("the access policy of account %s (version %d) does not let %s (%s) connect to %s",
		c.AID, pol.Version, p.user.Email, groups, c.CID),
		fmt.Sprintf("ask an operator of %s to add you to a group that may connect to %s; they can check with: runos policy test --user %s --to %s",
			c.AID, c.CID, p.user.Email, c.CID))
	entry := &audit.Entry{AIDs: []string{c.AID}, Kind: audit.JoinRefused, CID: c.CID, Target: d.ID,
		Outcome: fmt.Sprintf("%s (%s) may not connect to %s: %s", d.Name, p.user.Email, c.CID, dec.Reason)}
	return e, entry, nil
}

// recordRefusal writes the audit entry of a refused change in a change of
// its own: the refused one rolled back, entry and all.
func (s *Server) recordRefusal(r *http.Request, p *principal, e audit.Entry) {
	err := s.update(r.Context(), func(tx store.Writer) error { return s.record(tx, r, p, e) })
	if err != nil {
		s.log.Warn("audit of a refusal", "kind", e.Kind, "target", e.Target, "err", err)
	}
}

// gatewayPolicy adds what a gateway enforces to its service: the
// account's document and each peer's user and groups (nothing when the
// account has no policy).
func gatewayPolicy(rd store.Reader, aid string, gs *api.GatewayService, peers []model.Peer) error {
	doc, err := rd.Policy(aid)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	gs.Policy = doc.Document
	groups, err := rd.Groups(aid)
	if err != nil {
		return err
	}
	of := groupsOfMembers(groups)
	for i, p := range peers {
		email := strings.ToLower(p.User)
		gs.Peers[i].User, gs.Peers[i].Groups = email, of[email]
	}
	return nil
}

// groupsOfMembers are the names of the groups each member (a lowercase
// email, as the store keeps them) is in, in the groups' order (by name).
func groupsOfMembers(groups []model.Group) map[string][]string {
	of := map[string][]string{}
	for _, g := range groups {
		for _, m := range g.Members {
			of[m] = append(of[m], g.Name)
		}
	}
	return of
}

// touchGateways wakes every gateway of the account's clusters: their maps
// carry the policy and their peers' groups.
func touchGateways(tx store.Writer, aid string) error {
	tx.Touch(hub.Policy(aid))
	cs, err := tx.Clusters([]string{aid})
	if err != nil {
		return err
	}
	for _, c := range cs {
		nodes, err := tx.Nodes(c.CID)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			tx.Touch(hub.Gateway(c.CID, n.NID))
		}
	}
	return nil
}
