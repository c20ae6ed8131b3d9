package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/policy"
)

// An operator lists, shows, revokes and deletes the devices of their
// account (a device is its user's: it belongs to the user's accounts); a
// user sees and removes their own. Revoking ends the device's session in
// the same transaction as the session end of `runos vpn down` does, so
// its peers leave every gateway by the same push, and refuses its key from
// then on: the daemon shows the device as revoked and makes a new key at
// the next `runos vpn up`.

// deviceDetail builds a device's document inside rd's snapshot.
func deviceDetail(rd store.Reader, d model.Device, now time.Time) (api.DeviceDetail, error) {
	out := api.DeviceDetail{Device: deviceDoc(d), State: api.DeviceSignedOut, CreatedAt: d.CreatedAt, LastSeen: d.LastSeen,
		LastHandshake: d.LastHandshake, RevokedAt: d.RevokedAt, RevokedBy: d.RevokedBy, Clusters: []api.DeviceCluster{}}
	ms, err := rd.Memberships(d.ID)
	if err != nil {
		return out, err
	}
	for _, m := range ms {
		out.Clusters = append(out.Clusters, api.DeviceCluster{CID: m.CID, LastHandshake: m.LastHandshake})
	}
	if d.Revoked() {
		out.State = api.DeviceRevoked
		return out, nil
	}
	if d.SessionID != "" {
		sess, err := rd.Session(d.SessionID)
		switch {
		case err == nil && sess.LiveAt(now):
			out.State, out.SessionID, out.SessionExpiresAt = api.DeviceActive, sess.ID, sess.ExpiresAt
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return out, err
		}
	}
	return out, nil
}

// operatedDevice reads device id for an operator: 404 unless it is within
// the reach of the accounts the caller operates (reach.go). A plain user
// is told they are no operator, unless an `operate` rule grants them
// revoke-devices on a cluster the device joined. It returns the accounts
// whose audit log records a change to it, and those whose reach the
// caller sees it within (for trim).
func operatedDevice(rd store.Reader, p *principal, id string) (model.Device, []string, []string, error) {
	mine, err := operatedAccounts(p, "")
	if err == errNotOperator && p.kind == kindUser {
		return ruledDevice(rd, p, id)
	}
	if err != nil {
		return model.Device{}, nil, nil, err
	}
	d, err := rd.Device(id)
	if err == nil {
		ok, err := newReach(rd, mine).device(d)
		if err != nil {
			return model.Device{}, nil, nil, err
		}
		if ok {
			aids, err := deviceAccounts(rd, d)
			return d, aids, mine, err
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return model.Device{}, nil, nil, err
	}
	return model.Device{}, nil, nil, errNotFound("no device %s among your account's devices (list them: runos devices list)", id)
}

// ruledDevice is operatedDevice for a user with no operator role: the
// device is theirs to revoke when it joined a cluster of their accounts on
// which the account's policy grants them revoke-devices; anything else is
// the non-operator's 403, a missing device included.
func ruledDevice(rd store.Reader, p *principal, id string) (model.Device, []string, []string, error) {
	d, err := rd.Device(id)
	if errors.Is(err, store.ErrNotFound) {
		return model.Device{}, nil, nil, errNotOperator
	} else if err != nil {
		return model.Device{}, nil, nil, err
	}
	cids, err := rd.DeviceClusters(d.ID)
	if err != nil {
		return model.Device{}, nil, nil, err
	}
	var granted []string
	for _, cid := range cids {
		c, err := rd.Cluster(cid)
		if errors.Is(err, store.ErrNotFound) || err == nil && !p.user.InAccount(c.AID) {
			continue
		} else if err != nil {
			return model.Device{}, nil, nil, err
		}
		pol, _, err := accountPolicy(rd, c.AID)
		if err != nil {
			return model.Device{}, nil, nil, err
		}
		subj, err := subject(rd, c.AID, p.user)
		if err != nil {
			return model.Device{}, nil, nil, err
		}
		if pol.MayOperate(subj, cid, policy.RevokeDevices).Allow && !slices.Contains(granted, c.AID) {
			granted = append(granted, c.AID)
		}
	}
	if len(granted) == 0 {
		return model.Device{}, nil, nil, errNotOperator
	}
	aids, err := deviceAccounts(rd, d)
	return d, aids, granted, err
}

// operatedAccounts are the accounts an operator listing is about: ?aid=,
// else every account the caller operates.
func operatedAccounts(p *principal, aid string) ([]string, error) {
	if aid != "" {
		a, err := operatedAccount(p, aid)
		return []string{a}, err
	}
	mine := p.operated()
	if len(mine) == 0 {
		return nil, errNotOperator
	}
	return mine, nil
}

func (s *Server) handleDevices(w http.ResponseWriter, r *http.Request, p *principal) {
	q := r.URL.Query()
	aids, err := operatedAccounts(p, q.Get("aid"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f := store.DeviceFilter{AIDs: aids, User: strings.TrimSpace(q.Get("user")), CID: q.Get("cid")}
	s.listDevices(w, r, p, f, true)
}

func (s *Server) handleMyDevices(w http.ResponseWriter, r *http.Request, p *principal) {
	s.listDevices(w, r, p, store.DeviceFilter{AIDs: p.accounts(), User: p.user.Email}, false)
}

// listDevices lists the devices f selects; for an operator's view, only
// those within the reach of f's accounts, each with only the clusters
// within it.
func (s *Server) listDevices(w http.ResponseWriter, r *http.Request, p *principal, f store.DeviceFilter, operator bool) {
	out := []api.DeviceDetail{}
	now := s.now()
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		if f.CID != "" {
			if _, err := cluster(rd, p, f.CID, policy.RevokeDevices); err != nil {
				return err
			}
		}
		ds, err := rd.Devices(f)
		if err != nil {
			return err
		}
		x := newReach(rd, f.AIDs)
		for _, d := range ds {
			if operator {
				ok, err := x.device(d)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
			}
			dd, err := deviceDetail(rd, d, now)
			if err != nil {
				return err
			}
			if operator {
				if err := x.trim(&dd); err != nil {
					return err
				}
			}
			out = append(out, dd)
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDevice(w http.ResponseWriter, r *http.Request, p *principal) {
	id := r.PathValue("id")
	var out api.DeviceDetail
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		d, err := rd.Device(id)
		own := err == nil && p.kind == kindUser && d.User == p.user.Email
		var seen []string
		if !own {
			if d, _, seen, err = operatedDevice(rd, p, id); err != nil {
				return err
			}
		}
		if out, err = deviceDetail(rd, d, s.now()); err != nil || own {
			return err
		}
		return newReach(rd, seen).trim(&out)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// revokeDevice revokes d inside tx: its key refused, its session ended as
// revoked, its peers out of every gateway. It returns what it did, for
// the audit entry.
func (s *Server) revokeDevice(tx store.Writer, d *model.Device, by string, now time.Time) (string, error) {
	d.RevokedAt, d.RevokedBy = now, by
	if err := tx.UpdateDevice(*d); err != nil {
		return "", err
	}
	if err := tx.PutRevokedKey(model.RevokedKey{PublicKey: d.PublicKey, DeviceID: d.ID, User: d.User, RevokedAt: now, RevokedBy: by}); err != nil && !errors.Is(err, store.ErrExists) {
		return "", err
	}
	what := "key refused"
	if d.SessionID != "" {
		sess, err := tx.Session(d.SessionID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		if err == nil && sess.LiveAt(now) {
			if err := closeSession(tx, sess, model.SessionRevoked, now); err != nil {
				return "", err
			}
			what = "session " + sess.ID + " ended, " + what
		}
	}
	cids, err := tx.DeviceClusters(d.ID)
	if err != nil {
		return "", err
	}
	if err := touchPeers(tx, *d); err != nil {
		return "", err
	}
	if len(cids) > 0 {
		what += "; off the gateways of " + strings.Join(cids, ", ")
	}
	return what, nil
}

func (s *Server) handleRevokeDevice(w http.ResponseWriter, r *http.Request, p *principal) {
	id := r.PathValue("id")
	now := s.now()
	var out api.DeviceDetail
	err := s.update(r.Context(), func(tx store.Writer) error {
		d, aids, seen, err := operatedDevice(tx, p, id)
		if err != nil {
			return err
		}
		if d.Revoked() {
			return errConflict(fmt.Sprintf("device %s was already revoked at %s by %s", id, d.RevokedAt.UTC().Format(time.RFC3339), d.RevokedBy),
				"delete it to free its address: runos devices delete "+id)
		}
		x := newReach(tx, seen) // the accounts through which the caller acts on d
		foreign, err := x.foreign(d)
		if err != nil {
			return err
		}
		var what string
		if len(foreign) > 0 { // also another account's: only out of the caller's clusters (access_scope.go)
			var cids []string
			if cids, aids, err = x.cutFromMine(tx, d); err != nil {
				return err
			}
			what = cutOutcome(cids)
		} else if what, err = s.revokeDevice(tx, &d, p.actor().String(), now); err != nil {
			return err
		}
		if err := s.record(tx, r, p, audit.Entry{AIDs: aids, Kind: audit.DeviceRevoked, Target: d.ID,
			Outcome: fmt.Sprintf("%s (%s of %s): %s", d.Name, d.Address, d.User, what)}); err != nil {
			return err
		}
		if out, err = deviceDetail(tx, d, now); err != nil {
			return err
		}
		return x.trim(&out)
	})
	if err != nil {
		s.fail(w, r, fmt.Errorf("revoke device %s: %w", id, err))
		return
	}
	s.log.Info("device revoked", "device", id, "user", out.User, "by", p.actor().String())
	s.afterSessionsClosed()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDeleteDevice(w http.ResponseWriter, r *http.Request, p *principal) {
	id := r.PathValue("id")
	now := s.now()
	var d model.Device
	err := s.update(r.Context(), func(tx store.Writer) error {
		var aids []string
		var err error
		if d, aids, _, err = operatedDevice(tx, p, id); err != nil {
			return err
		}
		dd, err := deviceDetail(tx, d, now)
		if err != nil {
			return err
		}
		if dd.State == api.DeviceActive {
			return errConflict(fmt.Sprintf("device %s is in use: its session is live until %s", id, dd.SessionExpiresAt.UTC().Format(time.RFC3339)),
				"revoke it first: runos devices revoke "+id)
		}
		if err := deleteDevice(tx, d); err != nil {
			return err
		}
		return s.record(tx, r, p, audit.Entry{AIDs: aids, Kind: audit.DeviceDeleted, Target: d.ID,
			Outcome: fmt.Sprintf("%s (%s, %s of %s): deleted, address %s freed", d.Name, dd.State, d.OS, d.User, d.Address)})
	})
	if err != nil {
		s.fail(w, r, fmt.Errorf("delete device %s: %w", id, err))
		return
	}
	s.log.Info("device deleted", "device", id, "user", d.User, "address", d.Address, "by", p.actor().String())
	w.WriteHeader(http.StatusNoContent)
}

// deleteDevice deletes d with its memberships, telling those who follow
// its clusters.
func deleteDevice(tx store.Writer, d model.Device) error {
	if err := touchPeers(tx, d); err != nil {
		return err
	}
	return tx.DeleteDevice(d.ID)
}

// handleRemoveMyDevice is a user removing one of their own devices (a
// lost laptop): revoked and deleted at once.
func (s *Server) handleRemoveMyDevice(w http.ResponseWriter, r *http.Request, p *principal) {
	id := r.PathValue("id")
	now := s.now()
	var d model.Device
	err := s.update(r.Context(), func(tx store.Writer) error {
		var err error
		if d, err = ownDevice(tx, p, id); err != nil {
			return err
		}
		what := "revoked before"
		if !d.Revoked() {
			if what, err = s.revokeDevice(tx, &d, p.actor().String(), now); err != nil {
				return err
			}
		}
		if err := deleteDevice(tx, d); err != nil {
			return err
		}
		return s.record(tx, r, p, audit.Entry{AIDs: p.user.Accounts, Kind: audit.DeviceDeleted, Target: d.ID,
			Outcome: fmt.Sprintf("%s (%s) removed by its user: %s; address %s freed", d.Name, d.OS, what, d.Address)})
	})
	if err != nil {
		s.fail(w, r, fmt.Errorf("remove device %s: %w", id, err))
		return
	}
	s.log.Info("device removed by its user", "device", id, "user", d.User)
	s.afterSessionsClosed()
	w.WriteHeader(http.StatusNoContent)
}
