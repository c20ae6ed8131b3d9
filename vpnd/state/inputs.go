// Package state derives everything the daemon shows and does from its
// inputs, with pure functions: Derive gives the Status of the local API,
// Want gives the tunnel and DNS configuration to apply, and NextChange says
// when time alone will change either. Nothing else sets a status field, so
// the status can never disagree with the facts it was derived from.
package state

import (
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/platform/netmon"
	"github.com/runos/vpn/vpnd/store"
	"github.com/runos/vpn/vpnd/wake"
	"github.com/runos/vpn/vpnd/wgcfg"
)

// Inputs are every fact the daemon's state depends on.
type Inputs struct {
	Now       time.Time
	Version   string // the daemon's build
	Interface string // the tunnel's name (wg1)

	// Prefs: the session handed over and the clusters the user wants.
	Prefs store.Prefs
	// SessionEnded is set when control refused the session's token
	// (401 session_expired or unauthorized); SessionErr says what it said.
	SessionEnded bool
	SessionErr   string

	Map        *api.DeviceMap // the last device map from control; nil before the first
	Accounts   []api.Cluster  // GET /v1/clusters: the account's clusters
	ControlErr string         // the last exchange with control failed: why ("" when it worked)
	// ControlErrSince is when ControlErr last went from "" to an error.
	ControlErrSince time.Time
	// MapReceivedAt is when control sent Map. MapKept says Map is the
	// one kept on disk (vpnd/cache), restored at start: control has not
	// answered this run yet.
	MapReceivedAt time.Time
	MapKept       bool
	JoinErrs      map[string]string // by cid: control refused or failed the join
	// PendingErrs says why each of Prefs.Pending (by its Key) did not
	// reach control yet.
	PendingErrs map[string]string

	// SaveErr says why the last write of the prefs failed ("" when it
	// worked): the applier retries it.
	SaveErr string

	Device wgcfg.Report   // what the WireGuard device reports
	DNS    dnsplit.Status // the split-DNS configurator; Mode "" means off

	// Trust: which routes and DNS domains of control's are accepted (the
	// daemon's configuration; the zero value is the VPN's default pools).
	Trust Trust

	// Network is the uplink as platform/netmon last reported it, and
	// when it changed (zero before a change was seen).
	Network          netmon.State
	NetworkChangedAt time.Time
	// Slept is the daemon's last sleep (vpnd/wake): a session that lapsed
	// during it is said to have.
	Slept wake.Sleep
}

// SignedIn reports whether the session is live at in.Now.
func (in *Inputs) SignedIn() bool {
	return sessionState(in) == signedIn
}

type session int

const (
	signedOut session = iota
	signedIn
	expired
	revoked // control removed the device (Prefs.RevokedAt)
)

func sessionState(in *Inputs) session {
	switch {
	case !in.Prefs.RevokedAt.IsZero():
		return revoked
	case in.Prefs.AccessToken == "":
		return signedOut
	case in.SessionEnded:
		return expired
	case !in.Prefs.ExpiresAt.IsZero() && !in.Now.Before(in.Prefs.ExpiresAt):
		return expired
	}
	return signedIn
}
