package server

import (
	"context"
	"sync"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/store"
)

// Facts about devices that arrive far more often than they change: the
// handshakes in every gateway report (every 10 s, every peer) and a
// device's contact with control (every long-poll). Each is written when it
// changes (a handshake) or at most every so often (contact), so that
// neither turns reports and polls into a stream of writes.

// seenEvery is how often a device's "last seen" is written while it polls.
const seenEvery = 5 * time.Minute

// markSeen records that device id talked to control at now; it returns
// the contact recorded last (now, or a recent one that stands), which a
// request may keep to call again only once s.seen.fresh says it is stale.
func (s *Server) markSeen(ctx context.Context, id string, now time.Time) (last time.Time) {
	due, last := s.seen.due(id, now)
	if !due {
		return last
	}
	if _, err := s.st.Update(ctx, func(tx store.Writer) error { return tx.SetDeviceSeen(id, now) }); err != nil {
		s.log.Warn("record device contact", "device", id, "err", err)
	}
	return last
}

// handshakes remembers, per cluster and device key, the newest handshake
// written to the store, so that a report writes only what is new.
type handshakes struct {
	mu sync.Mutex
	m  map[string]time.Time // cid + "/" + public key
}

// handshakesMax bounds the memory: past it, it starts again (every
// handshake is then written once more, which is harmless).
const handshakesMax = 500_000

// fresh returns the handshakes of rep newer than those written for cid.
func (h *handshakes) fresh(cid string, hs []api.PeerHandshake, now time.Time) []api.PeerHandshake {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []api.PeerHandshake
	for _, p := range hs {
		at := p.At
		if at.After(now) {
			at = now // a gateway clock ahead of ours
		}
		if at.After(h.m[cid+"/"+p.PublicKey]) {
			out = append(out, api.PeerHandshake{PublicKey: p.PublicKey, At: at})
		}
	}
	return out
}

// written records handshakes committed to the store.
func (h *handshakes) written(cid string, hs []api.PeerHandshake) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.m)+len(hs) > handshakesMax {
		clear(h.m)
	}
	for _, p := range hs {
		h.m[cid+"/"+p.PublicKey] = p.At
	}
}

// recordHandshakes writes a gateway's new handshakes of cid's devices in
// the report's transaction; the cluster's account hears of it (the
// console's live "last handshake").
func recordHandshakes(tx store.Writer, cid, aid string, hs []api.PeerHandshake) error {
	changed := false
	for _, p := range hs {
		d, err := tx.DeviceByKey(p.PublicKey)
		if err != nil {
			if isStoreNotFound(err) {
				continue
			}
			return err
		}
		ok, err := tx.SetHandshake(d.ID, cid, p.At)
		if err != nil {
			return err
		}
		changed = changed || ok
	}
	if changed {
		tx.Touch(hub.Account(aid))
	}
	return nil
}

// poolWatch logs once when the device pool becomes nearly full, and once
// when it is no longer.
type poolWatch struct {
	mu     sync.Mutex
	warned bool
}

// poolNearlyFull is the share of the device pool in use past which it is
// reported (log and the cluster's status).
const poolNearlyFull = 0.9

// poolUsage is how full the device pool is, with a warning when nearly full.
func (s *Server) poolUsage(rd store.Reader) (api.PoolUsage, error) {
	lo, hi := s.devices.Range()
	u := api.PoolUsage{Prefix: s.devices.Prefix().String(), Size: hi - lo + 1}
	var err error
	if u.Used, err = rd.CountDevices(); err != nil {
		return u, err
	}
	if float64(u.Used) >= poolNearlyFull*float64(u.Size) {
		u.Warning = poolWarning(u)
	}
	return u, nil
}

func poolWarning(u api.PoolUsage) string {
	return "the device pool " + u.Prefix + " is nearly full (" + itoa(u.Used) + " of " + itoa(u.Size) +
		" addresses in use): delete devices nobody uses (runos devices list, runos devices delete ID), or start runos-control with a larger --device-pool"
}

// notePool logs the pool's state when it crosses the threshold.
func (s *Server) notePool(u api.PoolUsage) {
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	switch full := u.Warning != ""; {
	case full && !s.pool.warned:
		s.log.Warn("device pool nearly full", "pool", u.Prefix, "used", u.Used, "size", u.Size,
			"hint", "delete devices nobody uses, or a larger --device-pool")
	case !full && s.pool.warned:
		s.log.Info("device pool no longer nearly full", "pool", u.Prefix, "used", u.Used, "size", u.Size)
	}
	s.pool.warned = u.Warning != ""
}
