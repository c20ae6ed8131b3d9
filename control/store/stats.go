package store

import (
	"context"
	"time"
)

// Device states as Stats counts them (runos_control_devices{state}).
const (
	DeviceConnected = "connected"  // its session is live and it is joined to a cluster
	DeviceSignedIn  = "signed_in"  // its session is live, no cluster joined
	DeviceSignedOut = "signed_out" // no live session
	DeviceRevoked   = "revoked"    // revoked: its key is refused (until it is deleted)
)

// Stats are whole-store counts for control's metrics, read at scrape time
// so that every replica reports the database's truth.
type Stats struct {
	LiveSessions int
	Devices      map[string]int // by Device* state
}

// StatsReader is a store that counts for metrics. It is apart from Store
// so that a store without it still serves (its metrics lack the counts).
type StatsReader interface {
	Stats(ctx context.Context, now time.Time) (Stats, error)
}
