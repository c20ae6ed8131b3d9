package tunnel

import (
	"errors"
	"fmt"

	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Handshake sends a handshake initiation to the peer with key now, for
// `runos vpn doctor`'s UDP check: a WireGuard handshake proves the path,
// a ping would not. wireguard-go sends at most one initiation per peer
// every 5 s (RekeyTimeout); within that the one in flight is the probe.
// The answer is read from the device as every handshake is (Read).
func (e *Engine) Handshake(key wgtypes.Key) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("tunnel closed")
	}
	peer := e.dev.LookupPeer(device.NoisePublicKey(key))
	if peer == nil {
		return fmt.Errorf("no peer %s on %s", key, e.name)
	}
	return peer.SendHandshakeInitiation(false)
}
