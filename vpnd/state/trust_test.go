package state

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// What a hostile control sends is refused, visibly, and nothing of it
// reaches the tunnel's routes or the resolver.
func TestTrustRefusesRoutesOutsideThePools(t *testing.T) {
	evil := ky3n1
	evil.VPN.Subnet, evil.VPN.Address, evil.VPN.DNS = "0.0.0.0/1", "100.100.1.1", "100.100.1.1"
	in := base()
	in.Prefs = signedInPrefs("ky3", "xym")
	in.Map = dmap(evil, xym)
	in.Device = device(peer(key1, t0), peer(keyX, t0))
	p := Want(&in)
	for _, r := range p.Tunnel.Routes {
		if r.Bits() < 16 {
			t.Fatalf("route %s reached the plan", r)
		}
	}
	if len(p.Tunnel.Peers) != 1 || p.Tunnel.Peers[0].CID != "xym" {
		t.Fatalf("peers = %+v, want xym's only", p.Tunnel.Peers)
	}
	st := Derive(&in)
	c := clusterOf(st, "ky3")
	if c.State != "error" || !strings.Contains(c.Error, "0.0.0.0/1") || !strings.Contains(c.Error, "outside the VPN's pools") {
		t.Fatalf("ky3 = %s %q, want an error naming the refused subnet", c.State, c.Error)
	}
	if got := Refusals(in.Map, in.Trust); len(got) != 1 || !strings.Contains(got[0], "0.0.0.0/1") {
		t.Fatalf("Refusals = %q", got)
	}

	// The same subnet inside an allow-list of the daemon's own is used.
	in.Map = dmap(ky3Subnet("10.200.0.0/24"))
	if p := Want(&in); len(p.Tunnel.Peers) != 0 {
		t.Fatalf("10.200.0.0/24 accepted with the default pools: %+v", p.Tunnel.Peers)
	}
	in.Trust.Routes = []netip.Prefix{netip.MustParsePrefix("100.96.0.0/16"), netip.MustParsePrefix("10.200.0.0/16")}
	if p := Want(&in); len(p.Tunnel.Routes) != 1 || p.Tunnel.Routes[0].String() != "10.200.0.0/24" {
		t.Fatalf("routes with the allow-list = %v", p.Tunnel.Routes)
	}
}

func ky3Subnet(sn string) api.ClusterConfig {
	c := ky3n1
	a := strings.TrimSuffix(sn, "0/24") + "1"
	c.VPN.Subnet, c.VPN.Address, c.VPN.DNS = sn, a, a
	return c
}

func TestTrustRefusesDeviceAddressOutsideThePools(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3")
	in.Map = dmap(ky3n1)
	in.Map.Device.Address = "8.8.8.8"
	if p := Want(&in); len(p.Tunnel.Addresses) != 0 || len(p.Tunnel.Peers) != 0 {
		t.Fatalf("plan with a device address outside the pools: %+v", p.Tunnel)
	}
	st := Derive(&in)
	if !strings.Contains(st.Tunnel.Error, "8.8.8.8") || !strings.Contains(st.Tunnel.Error, "refused") {
		t.Fatalf("tunnel error = %q", st.Tunnel.Error)
	}
}

func TestTrustDNSDomains(t *testing.T) {
	for _, tc := range []struct {
		name     string
		domain   string   // the cluster's own domain, as control names it
		domains  []string // what control sends to route
		allowed  []string // the daemon's --allowed-dns-domains
		want     []string // routed through the tunnel
		refusals int
	}{
		{"own domain", "ky3.rjwrn.example.com", []string{"ky3.rjwrn.example.com"}, nil, []string{"ky3.rjwrn.example.com"}, 0},
		{"under it", "ky3.rjwrn.example.com", []string{"k8s.ky3.rjwrn.example.com"}, nil, []string{"k8s.ky3.rjwrn.example.com"}, 0},
		{"a top-level domain", "ky3.rjwrn.example.com", []string{"ky3.rjwrn.example.com", "com"}, nil, []string{"ky3.rjwrn.example.com"}, 1},
		{"a top-level domain, even allowed", "ky3.rjwrn.example.com", []string{"com"}, []string{"com"}, nil, 1},
		{"a parent", "ky3.rjwrn.example.com", []string{"example.com"}, nil, nil, 1},
		{"a look-alike", "ky3.rjwrn.example.com", []string{"xky3.rjwrn.example.com"}, nil, nil, 1},
		{"someone else's", "ky3.rjwrn.example.com", []string{"bank.example"}, nil, nil, 1},
		{"a custom domain, allowed", "ky3.rjwrn.example.com", []string{"apps.example.org"}, []string{"example.org"}, []string{"apps.example.org"}, 0},
		{"own domain of one label", "com", []string{"com", "ky3.com"}, nil, nil, 2},
		{"own domain not the cluster's", "example.com", []string{"example.com"}, nil, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ky3n1
			c.Domain = tc.domain
			c.VPN.Domains = tc.domains
			in := base()
			in.Prefs = signedInPrefs("ky3")
			in.Map = dmap(c)
			in.Device = device(peer(key1, t0.Add(-time.Second)))
			in.Trust.Domains = tc.allowed
			var got []string
			for _, r := range Want(&in).DNS {
				got = append(got, r.Domains...)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("routed domains = %q, want %q", got, tc.want)
			}
			refused := Refusals(in.Map, in.Trust)
			if len(refused) != tc.refusals {
				t.Errorf("refusals = %q, want %d", refused, tc.refusals)
			}
			cs := clusterOf(Derive(&in), "ky3")
			if tc.refusals > 0 && (cs.State != "connected" || !strings.Contains(cs.Error, "not used")) {
				t.Errorf("status = %s %q: want connected, with what was refused", cs.State, cs.Error)
			}
			if tc.refusals == 0 && cs.Error != "" {
				t.Errorf("status error = %q", cs.Error)
			}
			if !slices.Equal(cs.DNS.Domains, append([]string{}, tc.want...)) {
				t.Errorf("status domains = %q, want %q", cs.DNS.Domains, tc.want)
			}
		})
	}
}

func clusterOf(st localapi.Status, cid string) localapi.ClusterStatus {
	for _, c := range st.Clusters {
		if c.CID == cid {
			return c
		}
	}
	return localapi.ClusterStatus{}
}
