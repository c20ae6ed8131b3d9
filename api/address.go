package api

import "net/netip"

// CGNAT is 100.64.0.0/10 (RFC 6598): carrier-grade NAT, and the range
// Tailscale and other VPNs take their addresses from.
var CGNAT = netip.MustParsePrefix("100.64.0.0/10")

// AddressKind is the product's rule (docs/internals.md "Private vs
// public"): AddressPrivate for RFC 1918, ULA, CGNAT, link-local and
// loopback; AddressPublic otherwise, documentation ranges included. One
// rule for control's moves, the gateway's detection and the doctor.
func AddressKind(addr netip.Addr) string {
	a := addr.Unmap()
	if a.IsPrivate() || CGNAT.Contains(a) || a.IsLoopback() || a.IsLinkLocalUnicast() {
		return AddressPrivate
	}
	return AddressPublic
}
