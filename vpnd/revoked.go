package vpnd

import (
	"errors"
	"time"

	"github.com/runos/vpn/api"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// A device removed from RunOS (an operator revoked it, or its user removed
// it from another machine) hears it from control as 401 device_revoked on
// its next request: its long-poll answers at once. The daemon then forgets
// the session and the device id, takes every peer, route and DNS change
// down (the state derivation's revoked session wants nothing), keeps the
// wanted clusters for the next sign-in, and replaces the device key at
// once: control refuses the old one from then on, so `runos vpn up`
// registers a new key and a new device.

// revokedLocked puts the daemon in the revoked state. mu held.
func (d *daemon) revokedLocked(err error) {
	at := d.clock()
	why := err.Error()
	var ae *api.Error
	if errors.As(err, &ae) {
		why = ae.Message
		if !ae.At.IsZero() {
			at = ae.At
		}
	}
	d.log.Warn("control removed this device: the session is over and a new key is made for the next sign-in", "at", at.UTC().Format(time.RFC3339), "reason", why)
	d.stopSyncLocked()
	p := &d.in.Prefs
	p.AccessToken, p.ExpiresAt, p.DeviceID = "", time.Time{}, ""
	p.RevokedAt, p.RevokedWhy = at.UTC(), why
	d.savePrefsLocked()
	d.in.Map, d.in.Accounts, d.in.JoinErrs = nil, nil, nil
	d.in.SessionEnded, d.in.SessionErr, d.in.ControlErr = false, "", ""
	d.newKeyLocked()
}

// newKeyLocked replaces the device key, on disk and on the tunnel. A
// failure is logged: the next registration meets the refusal again and
// tries again. mu held.
func (d *daemon) newKeyLocked() bool {
	k, err := d.dir.NewKey()
	if err != nil {
		d.log.Error("replace the revoked device key", "err", err)
		return false
	}
	if err := d.eng.SetPrivateKey(k); err != nil {
		d.log.Error("replace the revoked device key on the tunnel", "err", err)
		return false
	}
	d.public = k.PublicKey()
	// The status reads the key from the last reading of the device, taken
	// after the next apply; say the new one now, so no status shows the
	// revoked session beside the refused key; a read of the device begun
	// before the change is not taken.
	d.in.Device.PublicKey = d.public
	d.applied.deviceGen++
	return true
}

// publicKey is the device's public key (replaced after a revocation).
func (d *daemon) publicKey() wgtypes.Key {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.public
}
