package tunnel

import (
	"errors"
	"fmt"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// SetPrivateKey gives the device a new key (after control revoked the old
// one). Peers stay as they are; with a revoked device there are none.
func (e *Engine) SetPrivateKey(key wgtypes.Key) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("tunnel closed")
	}
	if err := e.host.Configure(wgtypes.Config{PrivateKey: &key}); err != nil {
		return fmt.Errorf("tunnel %s: set the device key: %w", e.name, err)
	}
	e.log.Info("tunnel key replaced", "interface", e.name, "publicKey", key.PublicKey().String())
	return nil
}
