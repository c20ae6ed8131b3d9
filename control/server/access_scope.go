package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// An operator's revoke and end-session act only on their accounts (issue
// 22, roles per account). A device's key and a session's token are one
// for all the accounts of their user: revoking the key or ending the
// session of a device that also joined a cluster of an account the caller
// does not operate would cut the user out of that account too, which is
// exactly what the security review found (acme's operator cutting a user
// out of beta).
//
// Refusing (409) was the other choice, and the worse one: an operator who
// finds a device they do not trust in their cluster must be able to cut it
// out of their clusters now, whatever else it belongs to. So such a verb is
// scoped instead: the device (every device of the session) leaves the
// caller's clusters, off their gateways at once by the same push as a
// leave, recorded in the caller's accounts' audit logs; its key and
// session stay for the accounts the caller does not operate. The user may
// join the caller's clusters again while still a member of that account:
// keeping them out for good is removing them from it. A device or session
// reaching only the caller's accounts is revoked or ended whole, as before.

// foreign lists the clusters d joined of accounts the caller does not
// operate (clusters since deleted, of no account, are no one's). x is the
// caller's reach.
func (x *reach) foreign(d model.Device) ([]string, error) {
	ms, err := x.rd.Memberships(d.ID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if _, ok := x.clusters[m.CID]; !ok {
			if _, err := x.cluster(m.CID); err != nil {
				return nil, err
			}
		}
		if aid := x.clusters[m.CID]; aid != "" && !slices.Contains(x.aids, aid) {
			out = append(out, m.CID)
		}
	}
	return out, nil
}

// sessionForeign reports whether a device of sess joined a cluster of an
// account the caller does not operate (the session is not only theirs).
func (x *reach) sessionForeign(rd store.Reader, sess model.Session) (bool, error) {
	ds, err := rd.DevicesOfSession(sess.ID)
	if err != nil {
		return false, err
	}
	for _, d := range ds {
		f, err := x.foreign(d)
		if err != nil || len(f) > 0 {
			return len(f) > 0, err
		}
	}
	return false, nil
}

// cutFromMine takes d out of the clusters of the caller's accounts, its
// gateways there told at once; it returns the clusters it left and their
// accounts (the audit logs to record it in).
func (x *reach) cutFromMine(tx store.Writer, d model.Device) (cids, aids []string, err error) {
	ms, err := tx.Memberships(d.ID)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range ms {
		mine, err := x.cluster(m.CID)
		if err != nil {
			return nil, nil, err
		}
		if !mine {
			continue
		}
		if _, err := tx.LeaveCluster(d.ID, m.CID); err != nil {
			return nil, nil, fmt.Errorf("take device %s out of %s: %w", d.ID, m.CID, err)
		}
		if err := touchCluster(tx, m.CID); err != nil {
			return nil, nil, err
		}
		cids = append(cids, m.CID)
		if aid := x.clusters[m.CID]; !slices.Contains(aids, aid) {
			aids = append(aids, aid)
		}
	}
	tx.Touch(hub.Device(d.ID))
	if len(aids) == 0 {
		aids = x.aids // in none of the caller's clusters: their logs still say it was asked
	}
	slices.Sort(aids)
	return cids, aids, nil
}

// cutOutcome says what a scoped verb did, for the audit entry.
func cutOutcome(cids []string) string {
	left := "in none of your clusters"
	if len(cids) > 0 {
		left = "off the gateways of " + strings.Join(cids, ", ")
	}
	return left + "; its key and session kept: it is also in clusters of accounts you do not operate"
}
