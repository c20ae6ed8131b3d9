package server

import (
	"slices"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// What an operator reaches (issue 22). Operator is a role a user has in an
// account; a user may belong to accounts whose operators are different
// people. Of such a user, an operator sees and acts on only what is in the
// clusters of the accounts they operate: a device that joined one of those
// clusters, a session holding such a device. A user all of whose accounts
// the caller operates is theirs whole (devices that joined nothing,
// sessions with no device): nothing of another account can be touched.

// reach answers, inside one snapshot, what the accounts aids reach.
type reach struct {
	rd       store.Reader
	aids     []string
	users    map[string]model.User
	clusters map[string]string // cid: its account
}

func newReach(rd store.Reader, aids []string) *reach {
	return &reach{rd: rd, aids: aids, users: map[string]model.User{}, clusters: map[string]string{}}
}

func (x *reach) user(email string) (model.User, error) {
	if u, ok := x.users[email]; ok {
		return u, nil
	}
	u, err := x.rd.User(email)
	if err != nil {
		return u, err
	}
	x.users[email] = u
	return u, nil
}

// whole reports whether the caller operates every account of u.
func (x *reach) whole(u model.User) bool {
	for _, a := range u.Accounts {
		if !slices.Contains(x.aids, a) {
			return false
		}
	}
	return len(u.Accounts) > 0
}

// touches reports whether the caller operates some account of u.
func (x *reach) touches(u model.User) bool {
	for _, a := range u.Accounts {
		if slices.Contains(x.aids, a) {
			return true
		}
	}
	return false
}

// cluster reports whether cid is a cluster of an account the caller operates.
func (x *reach) cluster(cid string) (bool, error) {
	aid, ok := x.clusters[cid]
	if !ok {
		c, err := x.rd.Cluster(cid)
		if err != nil && !isStoreNotFound(err) {
			return false, err
		}
		aid = c.AID
		x.clusters[cid] = aid
	}
	return aid != "" && slices.Contains(x.aids, aid), nil
}

// device reports whether d is within reach: its user is the caller's
// whole, or it joined a cluster of theirs.
func (x *reach) device(d model.Device) (bool, error) {
	u, err := x.user(d.User)
	if err != nil || !x.touches(u) {
		return false, err
	}
	if x.whole(u) {
		return true, nil
	}
	ms, err := x.rd.Memberships(d.ID)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if ok, err := x.cluster(m.CID); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// session reports whether sess is within reach: its user is the caller's
// whole, or one of its devices is within reach.
func (x *reach) session(sess model.Session) (bool, error) {
	u, err := x.user(sess.User)
	if err != nil || !x.touches(u) {
		return false, err
	}
	if x.whole(u) {
		return true, nil
	}
	ds, err := x.rd.DevicesOfSession(sess.ID)
	if err != nil {
		return false, err
	}
	for _, d := range ds {
		if ok, err := x.device(d); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// trim leaves in dd only the clusters within reach: an operator of one
// account does not learn which clusters of another a device joined.
func (x *reach) trim(dd *api.DeviceDetail) error {
	u, err := x.user(dd.User)
	if err != nil || x.whole(u) {
		return err
	}
	kept := dd.Clusters[:0]
	for _, m := range dd.Clusters {
		ok, err := x.cluster(m.CID)
		if err != nil {
			return err
		}
		if ok {
			kept = append(kept, m)
		}
	}
	dd.Clusters = kept
	return nil
}

// deviceAccounts are the accounts whose audit log records a change to d:
// those of the clusters it joined, else (it joined none) its user's.
func deviceAccounts(rd store.Reader, d model.Device) ([]string, error) {
	ms, err := rd.Memberships(d.ID)
	if err != nil {
		return nil, err
	}
	var aids []string
	for _, m := range ms {
		c, err := rd.Cluster(m.CID)
		if isStoreNotFound(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		if !slices.Contains(aids, c.AID) {
			aids = append(aids, c.AID)
		}
	}
	if len(aids) == 0 {
		return userAccounts(rd, d.User)
	}
	slices.Sort(aids)
	return aids, nil
}

// sessionAccounts are the accounts whose audit log records the end of
// sess: those of the clusters its devices joined, else its user's.
func sessionAccounts(rd store.Reader, sess model.Session) ([]string, error) {
	ds, err := rd.DevicesOfSession(sess.ID)
	if err != nil {
		return nil, err
	}
	var aids []string
	for _, d := range ds {
		ms, err := rd.Memberships(d.ID)
		if err != nil {
			return nil, err
		}
		if len(ms) == 0 {
			continue
		}
		das, err := deviceAccounts(rd, d)
		if err != nil {
			return nil, err
		}
		for _, a := range das {
			if !slices.Contains(aids, a) {
				aids = append(aids, a)
			}
		}
	}
	if len(aids) == 0 {
		return userAccounts(rd, sess.User)
	}
	slices.Sort(aids)
	return aids, nil
}
