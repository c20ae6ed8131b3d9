package platform

import "net/netip"

// Route is one route of the machine's routing tables, as `runos vpn
// doctor` reads them to find what else claims a cluster's subnet.
type Route struct {
	Prefix    netip.Prefix
	Interface string // "" when the OS does not say
	Table     int    // Linux's table (254 main); 0 elsewhere
	Metric    int
}

// LongestMatch is the route of rs a packet to dst would take by prefix
// length alone (then the lowest metric); ok is false when none covers it.
// It stands in for the OS's own lookup where that is not callable.
func LongestMatch(rs []Route, dst netip.Addr) (Route, bool) {
	var best Route
	found := false
	for _, r := range rs {
		if !r.Prefix.Contains(dst) {
			continue
		}
		if !found || r.Prefix.Bits() > best.Prefix.Bits() ||
			r.Prefix.Bits() == best.Prefix.Bits() && r.Metric < best.Metric {
			best, found = r, true
		}
	}
	return best, found
}
