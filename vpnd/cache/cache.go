// Package cache keeps the last device map the daemon applied, so that a
// daemon started while control is unreachable (a reboot, a crash, an
// upgrade during an outage) brings the wanted clusters' tunnels, routes
// and split DNS back at once from it, and syncs with control when it can.
//
// It is for restarts only: while the daemon runs, control's live map is
// the truth, and a map from control (a revocation, a move) replaces the
// kept one at once. It is not a second store of the session: the kept map
// is used only with the session in prefs.json it was received under (same
// control, user and device), and never past that session's expiry (the
// state derivation wants nothing of an expired session).
//
// The file is read at start from disk the daemon owns, but it is treated
// as untrusted input: Parse bounds its size, checks its shape, and the map
// then goes through the same trust checks as one from control.
package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/atomicfile"
	"github.com/runos/vpn/vpnd/store"
)

// File is the kept map's name in the daemon's state directory.
const File = "last-map.json"

// MaxSize bounds the file: a map of hundreds of clusters is a few hundred
// kilobytes; anything larger is not one the daemon wrote.
const MaxSize = 4 << 20

// maxClusters bounds the clusters of a kept map, as MaxSize bounds bytes.
const maxClusters = 1000

// Entry is the kept map and what it belongs to.
type Entry struct {
	// Control, User and DeviceID are the session the map was received
	// under: it is used only with the same in prefs.
	Control  string `json:"control"`
	User     string `json:"user"`
	DeviceID string `json:"deviceId"`
	// ReceivedAt is when control sent the map: "using the configuration
	// of <ReceivedAt>".
	ReceivedAt time.Time     `json:"receivedAt"`
	Map        api.DeviceMap `json:"map"`
}

// Matches reports whether e belongs to the session in p.
func (e Entry) Matches(p store.Prefs) bool {
	return e.Control == p.APIURL && e.User == p.User && e.DeviceID == p.DeviceID && p.DeviceID != ""
}

// Parse reads a kept map, refusing anything the daemon would not have
// written: too large, not one JSON object, fields missing, or clusters
// that are not well-formed.
func Parse(b []byte) (Entry, error) {
	var e Entry
	if len(b) > MaxSize {
		return e, fmt.Errorf("%d bytes, more than the %d a kept map may have", len(b), MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&e); err != nil {
		return Entry{}, err
	}
	if dec.More() {
		return Entry{}, errors.New("more than one JSON value")
	}
	switch {
	case e.Control == "" || e.DeviceID == "" || e.User == "":
		return Entry{}, errors.New("no control, user or device")
	case e.ReceivedAt.IsZero():
		return Entry{}, errors.New("no time of receipt")
	case e.Map.Device.ID != e.DeviceID:
		return Entry{}, fmt.Errorf("the map is of device %q, not %q", e.Map.Device.ID, e.DeviceID)
	case len(e.Map.Clusters) > maxClusters:
		return Entry{}, fmt.Errorf("%d clusters, more than %d", len(e.Map.Clusters), maxClusters)
	}
	seen := map[string]bool{}
	for _, c := range e.Map.Clusters {
		if err := api.CheckCID(c.CID); err != nil {
			return Entry{}, err
		}
		if seen[c.CID] {
			return Entry{}, fmt.Errorf("cluster %s twice", c.CID)
		}
		seen[c.CID] = true
	}
	return e, nil
}

// Load reads the kept map in dir; ok is false when there is none. A file
// that does not parse is removed (the next map from control replaces it)
// and reported.
func Load(dir string) (e Entry, ok bool, err error) {
	ok, err = atomicfile.Load(filepath.Join(dir, File), MaxSize, func(b []byte) (err error) {
		e, err = Parse(b)
		return err
	})
	if err != nil {
		return Entry{}, false, fmt.Errorf("the kept map: %w", err)
	}
	return e, ok, nil
}

// Save writes e atomically, readable by root only (0600).
func Save(dir string, e Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return store.WriteFile(filepath.Join(dir, File), append(b, '\n'))
}

// Remove forgets the kept map (a sign-out, a revocation, another session).
func Remove(dir string) error {
	err := os.Remove(filepath.Join(dir, File))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
