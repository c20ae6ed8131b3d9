package vpnd

import (
	"time"

	"github.com/runos/vpn/vpnd/cache"
)

// The daemon keeps the last map it applied (vpnd/cache) so that a start
// while control is unreachable brings the wanted clusters back at once:
// restoreKeptLocked at start, keptLocked with each plan (the applier writes
// or removes the file after applying the plan).

// restoreKeptLocked makes the kept map the inputs' map when it belongs to
// the live session in prefs (the plan then brings its clusters back); a
// kept map of another session is left for keptLocked to remove or
// replace. mu held.
func (d *daemon) restoreKeptLocked() {
	d.keptOnDisk = true // until known otherwise: removed once signed out
	if !d.in.SignedIn() {
		return
	}
	e, ok, err := cache.Load(d.dir.Path)
	if err != nil {
		d.log.Warn("the kept configuration", "err", err)
	}
	if !ok || !e.Matches(d.in.Prefs) {
		return
	}
	m := e.Map
	d.in.Map, d.in.MapKept, d.in.MapReceivedAt = &m, true, e.ReceivedAt
	d.in.ControlErrSince = d.clock()
	d.keptAt, d.keptVer = e.ReceivedAt, m.Version
	d.log.Info("using the kept configuration until control answers", "of", e.ReceivedAt.UTC().Format(time.RFC3339),
		"version", m.Version, "clusters", len(m.Clusters))
}

// keptChanges reports whether the kept map is to change (keptLocked would
// return something). mu held.
func (d *daemon) keptChanges() bool { return d.newMapToKeep() || d.keptToDrop() }

// newMapToKeep: control sent a map for a live session since the last one
// handed over to be kept. mu held.
func (d *daemon) newMapToKeep() bool {
	in := &d.in
	return in.Map != nil && !in.MapKept && in.SignedIn() && (!in.MapReceivedAt.Equal(d.keptAt) || in.Map.Version != d.keptVer)
}

// keptToDrop: signed out or revoked (no token) with a kept map on disk. mu held.
func (d *daemon) keptToDrop() bool { return d.in.Prefs.AccessToken == "" && d.keptOnDisk }

// keptLocked says what becomes of the kept map with this plan: control's
// latest map of a live session is kept; once signed out or revoked, the
// kept one goes. mu held.
func (d *daemon) keptLocked() (*cache.Entry, bool) {
	in := &d.in
	switch {
	case d.newMapToKeep():
		d.keptAt, d.keptVer, d.keptOnDisk = in.MapReceivedAt, in.Map.Version, true
		if in.Map.Device.ID != in.Prefs.DeviceID {
			return nil, false // not this device's map: nothing a restart could use
		}
		return &cache.Entry{Control: in.Prefs.APIURL, User: in.Prefs.User, DeviceID: in.Prefs.DeviceID,
			ReceivedAt: in.MapReceivedAt, Map: *in.Map}, false
	case d.keptToDrop():
		d.keptAt, d.keptVer, d.keptOnDisk = time.Time{}, 0, false
		return nil, true
	}
	return nil, false
}
