package gateway

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"time"

	"github.com/runos/vpn/api"
)

// isPublic applies the project's rule (api.AddressKind) to an address a
// node could be reached at: not unspecified or multicast.
func isPublic(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && api.AddressKind(a) == api.AddressPublic
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
