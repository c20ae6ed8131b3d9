package server

import (
	"net/http"
	"strconv"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/policy"
)

// maxAuditLimit bounds one page of the audit log.
const maxAuditLimit = 500

func auditDoc(e audit.Entry) api.AuditEntry {
	return api.AuditEntry{ID: e.ID, At: e.At, Actor: e.Actor.Name, ActorKind: e.Actor.Kind, Source: e.Source,
		Kind: e.Kind, CID: e.CID, Target: e.Target, Outcome: e.Outcome}
}

// handleAudit lists the audit log of the accounts whose log the caller may
// read (the operator role, the account's token, a read-audit rule), newest
// first, a page at a time.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request, p *principal) {
	q := r.URL.Query()
	f := store.AuditFilter{CID: q.Get("cid"), Actor: q.Get("actor"), Kind: q.Get("kind")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditLimit {
			writeError(w, errInvalid("limit=%q: want 1 to %d", v, maxAuditLimit))
			return
		}
		f.Limit = n
	}
	if f.Limit == 0 {
		f.Limit = store.DefaultAuditLimit
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			writeError(w, errInvalid("before=%q: want the next of the previous page", v))
			return
		}
		f.Before = n
	}
	out := api.AuditPage{Entries: []api.AuditEntry{}}
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		aid, err := auditAccount(rd, p, f.CID, q.Get("aid"))
		if err != nil {
			return err
		}
		if f.AIDs, err = accountsAction(rd, p, aid, policy.ReadAudit); err != nil {
			return err
		}
		// One more than asked tells whether there is a next page.
		more := f
		more.Limit++
		es, err := rd.AuditEntries(more)
		if err != nil {
			return err
		}
		if len(es) > f.Limit {
			es = es[:f.Limit]
			out.Next = es[len(es)-1].ID
		}
		for _, e := range es {
			out.Entries = append(out.Entries, auditDoc(e))
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// auditAccount is the account a page filtered by cluster cid is about:
// the cluster's (404 for one the caller does not see, or not in aid), so
// that a refusal names the account whose log it is; aid when no cid.
func auditAccount(rd store.Reader, p *principal, cid, aid string) (string, error) {
	if cid == "" {
		return aid, nil
	}
	c, err := cluster(rd, p, cid, noVerb)
	if err == nil && aid != "" && aid != c.AID {
		err = errNotFound("no cluster %s in %s (list them: runos clusters list)", cid, aid)
	}
	return c.AID, err
}
