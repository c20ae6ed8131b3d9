package gateway

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"time"
)

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// isPublic applies the project's rule (docs/internals.md, "Private vs
// public"): private is RFC 1918 and ULA, CGNAT, link-local and loopback;
// everything else, documentation ranges included, is public.
func isPublic(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && !a.IsUnspecified() && !a.IsPrivate() && !cgnat.Contains(a) &&
		!a.IsLoopback() && !a.IsLinkLocalUnicast() && !a.IsMulticast()
}

// DetectPublicIP returns a detector of the node's public address: the
// source address the kernel picks towards control, when that address is
// public (behind NAT it is not, and nothing is reported). Connecting a UDP
// socket sends no packet.
func DetectPublicIP(controlURL string) func() string {
	return func() string {
		u, err := url.Parse(controlURL)
		if err != nil || u.Hostname() == "" {
			return ""
		}
		port := u.Port()
		if port == "" {
			port = "443"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var d net.Dialer
		c, err := d.DialContext(ctx, "udp", net.JoinHostPort(u.Hostname(), port))
		if err != nil {
			return ""
		}
		defer c.Close()
		ap, err := netip.ParseAddrPort(c.LocalAddr().String())
		if err != nil || !isPublic(ap.Addr()) {
			return ""
		}
		return ap.Addr().Unmap().String()
	}
}
