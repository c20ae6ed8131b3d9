package platform

import "net/netip"

// TunnelNet sets the addresses and routes of a tunnel interface the daemon
// owns. Each Set call replaces the whole set, so callers pass what they want,
// not what changed; a call with the same set again changes nothing.
type TunnelNet interface {
	// Up brings the interface up.
	Up() error
	// SetAddresses makes addrs the interface's addresses (e.g. the device's /32).
	SetAddresses(addrs []netip.Prefix) error
	// SetRoutes makes routes, through the interface, exactly the routes the
	// daemon added; routes anyone else added are left alone.
	SetRoutes(routes []netip.Prefix) error
}
