package state

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/runos/vpn/api"
)

// Trust is how far the daemon, which runs as root, believes control: a
// control server (or a member of the runos group pointing the daemon at
// one) must not be able to route 0.0.0.0/1 through the tunnel or answer
// for com. It comes from the daemon's own configuration, never from
// control.
type Trust struct {
	// Routes: a cluster's subnet and the device's tunnel address must lie
	// inside one of these; empty means the VPN's default pools.
	Routes []netip.Prefix
	// Domains: DNS domains accepted (with what is under them) besides
	// those under each cluster's own domain.
	Domains []string
}

// DefaultRoutes are the VPN's pools as control hands them out by default.
func DefaultRoutes() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix(api.DefaultDevicePool), netip.MustParsePrefix(api.DefaultServicePool)}
}

func (t Trust) routes() []netip.Prefix {
	if len(t.Routes) == 0 {
		return DefaultRoutes()
	}
	return t.Routes
}

// checkRoute refuses a prefix that is not inside an allowed one.
func (t Trust) checkRoute(p netip.Prefix) error {
	for _, a := range t.routes() {
		if a.Bits() <= p.Bits() && a.Contains(p.Addr()) {
			return nil
		}
	}
	return fmt.Errorf("%s is outside the VPN's pools %s (the daemon's --allowed-routes)", p, strings.Join(Prefixes(t.routes()), ", "))
}

// ownDomain is the cluster's own domain as control named it, accepted only
// as <cid>.<at least one more label> (the product's <cid>.<aid>.<root>).
func ownDomain(cc api.ClusterConfig) (string, error) {
	d := strings.ToLower(strings.TrimSuffix(cc.Domain, "."))
	if checkDomain(d) != nil || !strings.HasPrefix(d, cc.CID+".") {
		return "", fmt.Errorf("control named %q as the domain of %s: want %s.<aid>.<root>", cc.Domain, cc.CID, cc.CID)
	}
	return d, nil
}

// checkDomain refuses a DNS domain that is neither under the cluster's own
// domain nor under an allowed one; a domain of one label (com) never passes.
func (t Trust) checkDomain(own, d string) error {
	d = strings.ToLower(strings.TrimSuffix(d, "."))
	if !strings.Contains(d, ".") {
		return fmt.Errorf("DNS domain %q has one label: a whole top-level domain is never routed into the tunnel", d)
	}
	under := func(base string) bool { return base != "" && (d == base || strings.HasSuffix(d, "."+base)) }
	if under(own) || slices.ContainsFunc(t.Domains, func(a string) bool { return under(strings.ToLower(strings.TrimSuffix(a, "."))) }) {
		return nil
	}
	if own == "" {
		return fmt.Errorf("DNS domain %q refused: the cluster has no valid domain of its own", d)
	}
	return fmt.Errorf("DNS domain %q is not under the cluster's domain %s (the daemon's --allowed-dns-domains)", d, own)
}
