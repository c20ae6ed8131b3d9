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

// handleAudit lists the audit log of the accounts the caller operates,
// newest first, a page at a time.
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
	var err error
	if f.AIDs, err = operatedAccounts(p, q.Get("aid")); err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.AuditPage{Entries: []api.AuditEntry{}}
	err = s.st.View(r.Context(), func(rd store.Reader) error {
		if f.CID != "" {
			if _, err := cluster(rd, p, f.CID, policy.ReadAudit); err != nil {
				return err
			}
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
