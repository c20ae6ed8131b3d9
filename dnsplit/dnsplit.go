// Package dnsplit makes only the connected clusters' names resolve over the
// tunnel; everything else resolves as it did before. One Configurator per
// OS (systemd-resolved over D-Bus, a resolv.conf-fronting forwarder,
// /etc/resolver files on macOS, NRPT rules on Windows) sits behind the
// Configurator interface; New picks one and logs the choice with reasons.
//
// Every change is recorded in the state directory before it is made, so
// that Cleanup (run by `runos vpnd --cleanup`, at daemon start, and by the
// system service after the daemon stops) can undo it after a crash.
package dnsplit

import (
	"context"
	"net/netip"
)

// Route is one connected cluster's DNS: names under Domains resolve through
// Server, which is reached through the tunnel interface.
type Route struct {
	CID     string
	Server  netip.Addr
	Domains []string // e.g. ky3.rjwrn.example.com (no leading dot, no ~)
}

// Status is what `runos vpn status` shows under dns.
type Status struct {
	Mode   string // systemd-resolved, resolv.conf, resolver-files, nrpt, off
	Reason string // why this mode was chosen
	Error  string // e.g. another program keeps rewriting resolv.conf
	// Rewrites is how often another program rewrote the resolver
	// configuration behind split DNS within the last ten minutes (each
	// one re-applied until it gives up; then Error says so).
	Rewrites int
}

// Queries count what the built-in forwarder handled since the
// configurator started.
type Queries struct {
	Answered  uint64 // answers sent to programs on this machine (refusals included)
	Forwarded uint64 // queries sent on to a cluster's or the original servers
}

// QueryCounter is a Configurator whose built-in forwarder serves queries
// (resolv.conf mode; systemd-resolved mode's splitter). The others leave
// resolving to the OS and count nothing.
type QueryCounter interface {
	Queries() Queries
}

// Configurator routes the given clusters' domains to their servers.
type Configurator interface {
	// Set replaces the routes in effect; an empty list reverts every change.
	Set(ctx context.Context, routes []Route) error
	// Status reports the mode and any trouble.
	Status() Status
	// Close reverts every change and releases what the configurator holds.
	Close() error
}
