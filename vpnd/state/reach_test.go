package state

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/platform/netmon"
)

func withInside(c api.ClusterConfig, site int) api.ClusterConfig {
	m, _ := api.MappedRange(site)
	c.Inside = &api.ClusterInside{NodeNetwork: "10.10.0.0/24", PodRange: "10.244.0.0/16", ServiceRange: "10.96.0.0/12",
		DNSServer: "10.96.0.10", APIAddress: "10.10.0.100", Mapped: m.String()}
	return c
}

func peerIPs(p Plan, cid string) string {
	for _, pr := range p.Tunnel.Peers {
		if pr.CID == cid {
			return fmt.Sprint(pr.AllowedIPs)
		}
	}
	return ""
}

// Two clusters with the same internal ranges: the default one gets the
// raw ranges, both get their mapped range, the device its IPv6 address,
// and the default cluster the in-cluster DNS domain; status says which
// ranges are routed, shadowed (by whom) and mapped.
func TestReachOverlap(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3", "xym")
	in.Map = dmap(withInside(ky3n1, 2), withInside(xym, 3))
	for _, def := range []string{"", "ky3", "xym"} {
		in.Prefs.DefaultCID = def
		first, second := "ky3", "xym"
		if def == "xym" {
			first, second = "xym", "ky3"
		}
		p := Want(&in)
		if got := fmt.Sprint(p.Tunnel.Addresses); got != "[100.96.0.2/32 fd52:4f53:5600::6460:2/128]" {
			t.Errorf("default %q: addresses %s", def, got)
		}
		site := map[string]string{"ky3": "2", "xym": "3"}
		if got, want := peerIPs(p, first), "[100.100.X.0/24 fd52:4f53:5600:S::/96 10.10.0.0/24 10.244.0.0/16 10.96.0.0/12]"; got != strings.NewReplacer("X", map[string]string{"ky3": "1", "xym": "2"}[first], "S", site[first]).Replace(want) {
			t.Errorf("default %q: %s routes %s", def, first, got)
		}
		if got := peerIPs(p, second); strings.Contains(got, "10.") {
			t.Errorf("default %q: %s routes raw ranges too: %s", def, second, got)
		}
		for _, r := range p.DNS {
			if has := slices.Contains(r.Domains, ServiceDomain); has != (r.CID == first) {
				t.Errorf("default %q: %s DNS domains %v", def, r.CID, r.Domains)
			}
		}
		st := Derive(&in)
		for _, c := range st.Clusters {
			if !c.Wanted {
				continue
			}
			r := c.Reach
			if r == nil || r.Mapped != "fd52:4f53:5600:"+site[c.CID]+"::/96" {
				t.Fatalf("default %q: %s reach %+v", def, c.CID, r)
			}
			if c.CID == first && (!r.Default || len(r.Routed) != 3 || len(r.Shadowed) != 0) {
				t.Errorf("default %q: %s reach %+v", def, c.CID, r)
			}
			if c.CID == second && (r.Default || len(r.Routed) != 0 || len(r.Shadowed) != 3 || r.Shadowed[0].By != first) {
				t.Errorf("default %q: %s reach %+v", def, c.CID, r)
			}
		}
	}
}

// A laptop on a LAN that uses 10.0.0.0/8 keeps it: the cluster's ranges
// are shadowed by the local network and reached by the mapped range only.
func TestReachNeverTakesTheLAN(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3")
	in.Map = dmap(withInside(ky3n1, 2))
	in.Network = netmon.State{Addrs: []netmon.Addr{{Iface: "eth0", Addr: netip.MustParsePrefix("10.1.2.3/8")}}}
	p := Want(&in)
	if got := peerIPs(p, "ky3"); got != "[100.100.1.0/24 fd52:4f53:5600:2::/96]" {
		t.Errorf("routes %s", got)
	}
	r := clusterOf(Derive(&in), "ky3").Reach
	if len(r.Routed) != 0 || len(r.Shadowed) != 3 || !strings.Contains(r.Shadowed[0].By, "local network (eth0 10.0.0.0/8)") {
		t.Errorf("reach %+v", r)
	}
}

// Control cannot route public ranges through a cluster.
func TestReachRefusesPublicRanges(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3")
	c := withInside(ky3n1, 2)
	c.Inside.NodeNetwork, c.Inside.PodRange, c.Inside.ServiceRange, c.Inside.DNSServer, c.Inside.APIAddress = "0.0.0.0/1", "", "", "", ""
	in.Map = dmap(c)
	if got := peerIPs(Want(&in), "ky3"); strings.Contains(got, "0.0.0.0") {
		t.Errorf("routes %s", got)
	}
	if r := clusterOf(Derive(&in), "ky3").Reach; len(r.Refused) != 1 {
		t.Errorf("reach %+v", r)
	}
}

// Two clusters whose internal ranges do not overlap: each routes its own
// raw ranges, whichever is the default; only one has the in-cluster DNS
// domain.
func TestReachDisjointRangesGoToTheirOwners(t *testing.T) {
	in := base()
	in.Prefs = signedInPrefs("ky3", "xym")
	x := withInside(xym, 3)
	x.Inside.NodeNetwork, x.Inside.PodRange, x.Inside.ServiceRange = "10.20.0.0/24", "10.245.0.0/16", "10.112.0.0/12"
	x.Inside.DNSServer, x.Inside.APIAddress = "10.112.0.10", "10.20.0.100"
	in.Map = dmap(withInside(ky3n1, 2), x)
	for _, def := range []string{"ky3", "xym"} {
		in.Prefs.DefaultCID = def
		p := Want(&in)
		if got := peerIPs(p, "ky3"); got != "[100.100.1.0/24 fd52:4f53:5600:2::/96 10.10.0.0/24 10.244.0.0/16 10.96.0.0/12]" {
			t.Errorf("default %s: ky3 routes %s", def, got)
		}
		if got := peerIPs(p, "xym"); got != "[100.100.2.0/24 fd52:4f53:5600:3::/96 10.20.0.0/24 10.245.0.0/16 10.112.0.0/12]" {
			t.Errorf("default %s: xym routes %s", def, got)
		}
		st := Derive(&in)
		for _, cid := range []string{"ky3", "xym"} {
			r := clusterOf(st, cid).Reach
			if r == nil || len(r.Routed) != 3 || len(r.Shadowed) != 0 {
				t.Errorf("default %s: %s reach %+v", def, cid, r)
			}
		}
		for _, r := range p.DNS {
			if has := slices.Contains(r.Domains, ServiceDomain); has != (r.CID == def) {
				t.Errorf("default %s: %s DNS domains %v", def, r.CID, r.Domains)
			}
		}
	}
}
