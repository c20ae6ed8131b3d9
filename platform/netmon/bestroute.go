package netmon

import "net/netip"

// routeRow is one entry of a routing table as bestRoute needs it: where
// the OS hands out its table rather than answering "which route to dst"
// (Windows' forwarding table), the choice is made here.
type routeRow struct {
	Prefix netip.Prefix
	Metric uint32 // the route's and its interface's, summed as Windows does
	Iface  int    // interface index
}

// bestRoute is the row the OS would send dst by: the longest prefix that
// holds it, then the lowest metric; on a tie the first row, as listed.
func bestRoute(rows []routeRow, dst netip.Addr) (routeRow, bool) {
	dst = dst.Unmap()
	var best routeRow
	found := false
	for _, r := range rows {
		if !r.Prefix.IsValid() || r.Prefix.Addr().Is4() != dst.Is4() || !r.Prefix.Contains(dst) {
			continue
		}
		if !found || r.Prefix.Bits() > best.Prefix.Bits() ||
			r.Prefix.Bits() == best.Prefix.Bits() && r.Metric < best.Metric {
			best, found = r, true
		}
	}
	return best, found
}
