package cli

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/runos/vpn/vpnd/localapi"
)

// away is the laptop of healthy() on a phone's hotspot: ky3's node keeps
// its private ingress 10.77.0.21, which does not answer from here.
func away(t *testing.T, endpoint string) *doctorSys {
	sys, fd := healthy()
	sys.LocalAddrs = func() ([]netip.Prefix, error) { return []netip.Prefix{netip.MustParsePrefix("172.20.10.5/28")}, nil }
	c := &fd.st.Clusters[0]
	c.Server.Endpoint, c.PeerUp, c.Path = endpoint, false, localapi.PathRelay
	c.Relay, c.PathReason = "https://"+strings.Split(endpoint, ":")[0]+"/relay", "UDP got no answer; the relay timed out too"
	fd.probe = localapi.ProbeResult{OK: false}
	return sys
}

func TestDoctorPrivateIngressAway(t *testing.T) {
	rep, out := runDoctor(t, away(t, "10.77.0.21:32768"), doctorFlags{})
	words := "n1's ingress address 10.77.0.21 is private: it is reachable only from the cluster's own network, and this machine is not on it"
	fix := "connect from the cluster's own network, or give the node a reachable ingress address: runos nodes ingress n1 --cid ky3 --ingress-ip <reachable-ip>"
	for _, id := range []string{"ky3.endpoint", "ky3.udp", "ky3.path"} {
		c, ok := find(rep, id)
		if !ok || c.Status != checkFail || !strings.Contains(c.Finding, words) || c.Fix != fix {
			t.Errorf("%s: %+v", id, c)
		}
	}
	if strings.Contains(out, "allow UDP") || strings.Contains(out, "firewall") {
		t.Errorf("doctor blames the firewall for a private address:\n%s", out)
	}

	// Back on the node's network the same failure is the usual one: the
	// address is reachable, something else is wrong.
	sys := away(t, "10.77.0.21:32768")
	sys.LocalAddrs = func() ([]netip.Prefix, error) { return []netip.Prefix{netip.MustParsePrefix("10.77.0.101/24")}, nil }
	rep, out = runDoctor(t, sys, doctorFlags{})
	if c, _ := find(rep, "ky3.udp"); !strings.Contains(c.Fix, "allow UDP 32768") || strings.Contains(out, "is private") {
		t.Errorf("on the node's network: %+v\n%s", c, out)
	}

	// A move gave the node a public address: nothing is said about private.
	rep, out = runDoctor(t, away(t, "203.0.113.7:32768"), doctorFlags{})
	if c, _ := find(rep, "ky3.udp"); !strings.Contains(c.Fix, "allow UDP 32768") || strings.Contains(out, "is private") {
		t.Errorf("public address: %+v\n%s", c, out)
	}
}

func TestStatusPrivateIngressAway(t *testing.T) {
	sys := away(t, "10.77.0.21:32768")
	st, _ := sys.Daemon.(*fakeDoctorDaemon)
	hotspot := []netip.Prefix{netip.MustParsePrefix("172.20.10.5/28")}
	for _, tc := range []struct {
		name     string
		local    []netip.Prefix
		endpoint string
		private  bool
	}{
		{"away", hotspot, "10.77.0.21:32768", true},
		{"home", []netip.Prefix{netip.MustParsePrefix("10.77.0.101/24")}, "10.77.0.21:32768", false},
		{"moved to a public address", hotspot, "203.0.113.7:32768", false},
		{"local addresses unknown", nil, "10.77.0.21:32768", false},
	} {
		st.st.Clusters[0].Server.Endpoint = tc.endpoint
		var b bytes.Buffer
		renderStatus(&b, st.st, doctorNow, tc.local)
		said := strings.Contains(b.String(), "ky3: n1's ingress address 10.77.0.21 is private: it is reachable only from the cluster's own network")
		if said != tc.private || tc.private && strings.Contains(b.String(), "relayed over") {
			t.Errorf("%s:\n%s", tc.name, b.String())
		}
	}
}
