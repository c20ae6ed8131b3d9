package dnsplit

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// forwardTable is what the forwarder routes by; it is replaced whole, never
// edited, so a query in flight sees one consistent table.
type forwardTable struct {
	zones     []zone           // cluster domains, longest first
	upstreams []netip.AddrPort // the original nameservers, in order
	timeout   time.Duration    // per upstream attempt
	// refuseOthers answers REFUSED for names outside the zones instead of
	// asking upstreams: systemd-resolved's splitter, which resolved only
	// ever asks for cluster names.
	refuseOthers bool
}

// zone is one cluster domain and the server that answers it.
type zone struct {
	suffix string // canonical: lower case, trailing dot
	cid    string
	server netip.AddrPort
}

// newForwardTable routes each route's domains to its server (port 53) and
// everything else to upstreams. self (the forwarder's own address) is never
// an upstream: that would be a loop.
func newForwardTable(routes []Route, upstreams []netip.AddrPort, timeout time.Duration, self netip.AddrPort) *forwardTable {
	t := &forwardTable{timeout: timeout}
	if t.timeout <= 0 {
		t.timeout = defaultUpstreamTimeout
	}
	for _, r := range routes {
		for _, d := range r.Domains {
			s := dns.CanonicalName(strings.TrimPrefix(d, "."))
			if s == "." || slices.ContainsFunc(t.zones, func(z zone) bool { return z.suffix == s }) {
				continue
			}
			t.zones = append(t.zones, zone{suffix: s, cid: r.CID, server: netip.AddrPortFrom(r.Server, 53)})
		}
	}
	slices.SortStableFunc(t.zones, func(a, b zone) int { return dns.CountLabel(b.suffix) - dns.CountLabel(a.suffix) })
	for _, u := range upstreams {
		if u != self && u.IsValid() && !slices.Contains(t.upstreams, u) {
			t.upstreams = append(t.upstreams, u)
		}
	}
	if len(t.upstreams) == 0 && len(upstreams) == 0 {
		// What glibc does with no nameserver line: ask the local host.
		t.upstreams = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}
	}
	return t
}

// route returns the zone a name falls in, if it is a cluster name.
func (t *forwardTable) route(qname string) (zone, bool) {
	for _, z := range t.zones {
		if dns.IsSubDomain(z.suffix, qname) {
			return z, true
		}
	}
	return zone{}, false
}
