package tunnel

import (
	"errors"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/vpnd/wgcfg"
	"github.com/runos/vpn/wghost"
)

// A handshake initiation that arrives before the server knows this device
// (control answered the join, the gateway is adding the peer a moment later)
// is dropped, and wireguard-go retries only after 5 s. So while a new peer
// has no handshake, the engine re-creates it on a short backoff: a fresh
// peer sends its first initiation at once. The backoff starts at 100 ms
// (above a handshake round trip on a LAN; a slower path loses at most one
// initiation in flight to it, as the next wait is twice as long) and
// doubles; after maxNudges wireguard-go's own retries carry on.
const (
	firstNudge = 100 * time.Millisecond
	maxNudges  = 6 // 100 ms, 200 ms … 3.2 s
)

// Nudge re-creates peers that are due (see above); the daemon calls it on
// each of its reads of the device.
func (e *Engine) Nudge() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || len(e.peers) == 0 {
		return
	}
	now := e.now()
	due := false
	for _, t := range e.peers {
		due = due || (t.nudges < maxNudges && !now.Before(t.nextNudge))
	}
	if !due {
		return
	}
	dev, err := e.host.Device()
	if err != nil {
		return
	}
	var pcs []wgtypes.PeerConfig
	for _, p := range dev.Peers {
		t, ok := e.peers[p.PublicKey]
		if !ok || t.nudges >= maxNudges || now.Before(t.nextNudge) {
			continue
		}
		if !p.LastHandshakeTime.IsZero() && !p.LastHandshakeTime.Before(t.askedAt) {
			t.nudges = maxNudges // answered: nothing more to nudge
			continue
		}
		for _, ap := range e.applied.Peers {
			if ap.PublicKey == p.PublicKey {
				pcs = append(pcs, wghost.Recreate(hostPeer(ap))...)
			}
		}
		t.nudges++
		t.retries++
		t.nextNudge = now.Add(firstNudge << t.nudges)
	}
	if len(pcs) == 0 {
		return
	}
	if err := e.host.Configure(wgtypes.Config{Peers: pcs}); err != nil {
		e.log.Warn("re-create peers for a new handshake", "interface", e.name, "err", err)
		return
	}
	e.log.Debug("no handshake yet: re-created peers", "interface", e.name, "peers", len(pcs)/2)
}

// Asking for a handshake, in one place: Nudge (a new peer's first
// handshake, on a backoff), Rehandshake (a fresh session now: the server
// restarted, or the network changed under the tunnel) and Handshake (one
// initiation on the peer as it is, for runos vpn doctor's probe).

// Rehandshake makes the given peers (every peer when none is given) start
// a fresh handshake now instead of when WireGuard's timers would: each is
// re-created on the device in one UAPI transaction, which sends an
// initiation at once, and nudged again on the usual backoff until a
// handshake answers. It is the one way to ask for that: a VPN server that
// restarted (Apply, on a new epoch) and a network that changed under the
// tunnel both call it. It returns how many peers it re-created.
func (e *Engine) Rehandshake(keys ...wgtypes.Key) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0
	}
	now := e.now()
	var pcs []wgtypes.PeerConfig
	n := 0
	for _, p := range e.applied.Peers {
		if len(keys) > 0 && !containsKey(keys, p.PublicKey) {
			continue
		}
		pcs = append(pcs, e.recreate(p, now)...)
		n++
	}
	if n == 0 {
		return 0
	}
	if err := e.host.Configure(wgtypes.Config{Peers: pcs}); err != nil {
		e.log.Warn("re-handshake", "interface", e.name, "err", err)
		return 0
	}
	e.log.Info("handshaking again now", "interface", e.name, "peers", n)
	return n
}

// recreate is the UAPI change that re-creates p (removed and added in one
// transaction, so it is never missing) and restarts its nudges. mu held.
func (e *Engine) recreate(p wgcfg.Peer, now time.Time) []wgtypes.PeerConfig {
	if t, ok := e.peers[p.PublicKey]; ok {
		t.asked(now)
	} else {
		e.peers[p.PublicKey] = newTracked(now)
	}
	return wghost.Recreate(hostPeer(p))
}

func containsKey(ks []wgtypes.Key, k wgtypes.Key) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// Handshake sends a handshake initiation to the peer with key now, for
// `runos vpn doctor`'s UDP check: a WireGuard handshake proves the path,
// a ping would not. wireguard-go sends at most one initiation per peer
// every 5 s (RekeyTimeout); within that the one in flight is the probe.
// The answer is read from the device as every handshake is (Read).
func (e *Engine) Handshake(key wgtypes.Key) error {
	return e.withHost(func(h *wghost.Host) error { return h.Handshake(key) })
}

// withHost runs do on the WireGuard host under e.mu, unless the tunnel is
// closed.
func (e *Engine) withHost(do func(*wghost.Host) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("tunnel closed")
	}
	return do(e.host)
}
