package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/store"
)

// record writes the audit entry of a change a caller made, in the change's
// transaction: now, the caller as the actor, its address as the source.
func (s *Server) record(tx store.Writer, r *http.Request, p *principal, e audit.Entry) error {
	e.At, e.Actor, e.Source = s.now(), p.actor(), audit.SourceOf(r.RemoteAddr)
	return audit.Record(tx, e)
}

// userAccounts are the accounts whose operators see a user's changes.
func userAccounts(rd store.Reader, email string) ([]string, error) {
	u, err := rd.User(email)
	if err != nil {
		return nil, err
	}
	return u.Accounts, nil
}

// clusterAccount is the account of cid, for the audit entries of changes
// to the cluster.
func clusterAccount(rd store.Reader, cid string) ([]string, error) {
	c, err := rd.Cluster(cid)
	if err != nil {
		return nil, err
	}
	return []string{c.AID}, nil
}

func isStoreNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

func itoa(n int) string { return strconv.Itoa(n) }
