// Package store keeps the daemon's state directory: the device key and the
// prefs (what the user asked for and the session handed over), each file
// 0600 in a 0700 directory and written atomically, so a crash leaves either
// the old file or the new one, never half of one.
package store

import (
	"github.com/runos/vpn/internal/atomicfile"

	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// File names inside the state directory.
const (
	KeyFile   = "device.key"
	PrefsFile = "prefs.json"
)

// Dir is the daemon's state directory.
type Dir struct{ Path string }

// Open creates the directory (0700) if needed and tightens its mode if it
// was looser: it holds the device's private key.
func Open(path string) (Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return Dir{}, fmt.Errorf("state dir %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o700); err != nil {
		return Dir{}, fmt.Errorf("state dir %s: %w", path, err)
	}
	return Dir{Path: path}, nil
}

// WriteFile writes data to path atomically with mode 0600: a temporary file
// in the same directory, synced, then renamed over path.
func WriteFile(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Key returns the device's private key, generating and storing it on first
// use. The key never leaves this file: only its public half is sent.
func (d Dir) Key() (wgtypes.Key, error) {
	p := filepath.Join(d.Path, KeyFile)
	b, err := os.ReadFile(p)
	switch {
	case err == nil:
		k, perr := wgtypes.ParseKey(string(trimSpace(b)))
		if perr != nil {
			// Not the key's bytes in the message: only that it is malformed.
			return wgtypes.Key{}, fmt.Errorf("device key %s is malformed; move it away to make a new device", p)
		}
		return k, nil
	case errors.Is(err, os.ErrNotExist):
		k, gerr := wgtypes.GeneratePrivateKey()
		if gerr != nil {
			return wgtypes.Key{}, fmt.Errorf("generate device key: %w", gerr)
		}
		if werr := WriteFile(p, []byte(k.String()+"\n")); werr != nil {
			return wgtypes.Key{}, werr
		}
		return k, nil
	default:
		return wgtypes.Key{}, fmt.Errorf("device key: %w", err)
	}
}

// NewKey replaces the device's private key with a fresh one: control
// refuses a revoked device's key, so the next registration needs another.
func (d Dir) NewKey() (wgtypes.Key, error) {
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		return wgtypes.Key{}, fmt.Errorf("generate device key: %w", err)
	}
	if err := WriteFile(filepath.Join(d.Path, KeyFile), []byte(k.String()+"\n")); err != nil {
		return wgtypes.Key{}, err
	}
	return k, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// Prefs is what survives a restart of the daemon: the session handed over
// and the clusters the user wants. A restart with a valid session reconnects
// the same clusters without a browser.
type Prefs struct {
	// Control is the control server the daemon follows: set by the first
	// session handed over and kept after sign-out, so that only root or
	// the operator recorded at install can point the daemon elsewhere.
	Control     string    `json:"control,omitempty"`
	APIURL      string    `json:"apiUrl,omitempty"`
	AccessToken string    `json:"accessToken,omitempty"`
	ExpiresAt   time.Time `json:"expiresAt,omitzero"`
	User        string    `json:"user,omitempty"`
	DeviceID    string    `json:"deviceId,omitempty"`
	Wanted      []string  `json:"wanted,omitempty"` // cids, sorted
	// DefaultCID is the cluster the user works on, as the CLI said at the
	// last connect (issue 21): raw internal addresses go to it first.
	DefaultCID string `json:"defaultCid,omitempty"`
	// RevokedAt: control removed this device (its key is refused); the
	// session is gone and the key was replaced, until the next sign-in.
	RevokedAt  time.Time `json:"revokedAt,omitzero"`
	RevokedWhy string    `json:"revokedWhy,omitempty"` // control's words
	// Pending are changes made here that control has not heard yet
	// (it was unreachable): retried until it answers.
	Pending []Pending `json:"pending,omitempty"`
}

// Kinds of pending change.
const (
	PendingSignOut = "sign-out" // end the session (after leaving Clusters)
	PendingLeave   = "leave"    // leave Clusters[0]
)

// Pending is a change control has not heard yet. Token is the session's
// access token, kept after the session ended here only to tell control so;
// nothing else uses it.
type Pending struct {
	Kind      string    `json:"kind"`
	APIURL    string    `json:"apiUrl"`
	Token     string    `json:"token"`
	DeviceID  string    `json:"deviceId,omitempty"`
	Clusters  []string  `json:"clusters,omitempty"`
	Since     time.Time `json:"since"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"` // the session lapses then anyway: given up
}

// ID names a pending change for status and logs: "sign-out" or "leave xym".
func (p Pending) ID() string {
	if p.Kind == PendingLeave && len(p.Clusters) > 0 {
		return p.Kind + " " + p.Clusters[0]
	}
	return p.Kind
}

// Key tells pending changes apart (two sign-outs of two sessions, say)
// without showing the token: kind, clusters and a digest of the token.
func (p Pending) Key() string {
	h := sha256.Sum256([]byte(p.Token))
	return p.ID() + " " + hex.EncodeToString(h[:6])
}

// Clone returns a deep copy.
func (p Prefs) Clone() Prefs {
	p.Wanted = slices.Clone(p.Wanted)
	p.Pending = slices.Clone(p.Pending)
	return p
}

// LoadPrefs reads prefs.json; a missing file is empty prefs. A file that
// does not parse is moved aside (prefs.json.corrupt) so that the daemon
// starts signed out instead of not at all; the error says so.
func (d Dir) LoadPrefs() (Prefs, error) {
	p := filepath.Join(d.Path, PrefsFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return Prefs{}, nil
	}
	if err != nil {
		return Prefs{}, fmt.Errorf("prefs: %w", err)
	}
	var pr Prefs
	if err := json.Unmarshal(b, &pr); err != nil {
		bad := p + ".corrupt"
		_ = os.Rename(p, bad)
		return Prefs{}, fmt.Errorf("prefs %s does not parse (%v); moved it to %s and starting signed out", p, err, bad)
	}
	slices.Sort(pr.Wanted)
	pr.Wanted = slices.Compact(pr.Wanted)
	if pr.Control == "" {
		pr.Control = pr.APIURL // prefs of a daemon that predates the field
	}
	return pr, nil
}

// SavePrefs writes prefs.json atomically (0600).
func (d Dir) SavePrefs(pr Prefs) error {
	b, err := json.MarshalIndent(pr, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(filepath.Join(d.Path, PrefsFile), append(b, '\n'))
}
