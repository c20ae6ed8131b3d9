package tunnel

import (
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
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

// Nudge re-creates peers that are due (see above); the daemon calls it
// while it reads the device fast, after Read.
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
	dev, err := e.wg.Device(e.name)
	if err != nil {
		return
	}
	var pcs []wgtypes.PeerConfig
	for _, p := range dev.Peers {
		t, ok := e.peers[p.PublicKey]
		if !ok || !p.LastHandshakeTime.IsZero() || t.nudges >= maxNudges || now.Before(t.nextNudge) {
			continue
		}
		for _, ap := range e.applied.Peers {
			if ap.PublicKey == p.PublicKey {
				pcs = append(pcs, wgtypes.PeerConfig{PublicKey: p.PublicKey, Remove: true}, addPeer(ap))
			}
		}
		t.nudges++
		t.nextNudge = now.Add(firstNudge << t.nudges)
	}
	if len(pcs) == 0 {
		return
	}
	if err := e.wg.ConfigureDevice(e.name, wgtypes.Config{Peers: pcs}); err != nil {
		e.log.Warn("re-create peers for a new handshake", "interface", e.name, "err", err)
		return
	}
	e.log.Debug("no handshake yet: re-created peers", "interface", e.name, "peers", len(pcs)/2)
}
