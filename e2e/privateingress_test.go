//go:build !windows

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestPrivateIngressAway: ky3's VPN node has a private ingress address on
// the office LAN (10.77.0.21). Connected from the LAN, then the laptop
// leaves for the WAN (a phone's hotspot): the server cannot answer there,
// and status and doctor say why in the product docs' words (private:
// reachable only from the cluster's own network) rather than advising to
// open UDP in every firewall.
func TestPrivateIngressAway(t *testing.T) {
	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host
	ctx := context.Background()
	if err := w.lab.Uplink(ctx, laptop, lab.LAN); err != nil {
		t.Fatal(err)
	}
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	st := w.waitStatus(laptop, 20*time.Second, "ky3 up from the LAN", upOn("", "ky3"))
	if c, _ := cluster(st, "ky3"); !strings.HasPrefix(c.Server.Endpoint, "10.77.0.") {
		t.Fatalf("ky3's endpoint %q is not the LAN's private address", c.Server.Endpoint)
	}
	if err := w.lab.Uplink(ctx, laptop, lab.WAN); err != nil {
		t.Fatal(err)
	}
	w.waitStatus(laptop, 90*time.Second, "ky3 without an answer from the WAN", func(s *localapi.Status) bool {
		c, ok := cluster(s, "ky3")
		return ok && c.State == localapi.ClusterConnected && !c.PeerUp && strings.Contains(s.Network.Uplink, "wan0")
	})
	words := "is private: it is reachable only from the cluster's own network, and this machine is not on it"
	status := w.stdout(laptop, nil, "runos", "vpn", "status")
	if !strings.Contains(status, "ky3: n1's ingress address 10.77.0.21 "+words) || !strings.Contains(status, "give the node a reachable ingress address") {
		t.Errorf("status away from the LAN:\n%s", status)
	}
	doctor, _ := w.run(laptop, nil, "runos", "vpn", "doctor")
	if !strings.Contains(doctor, words) || strings.Contains(doctor, "in every firewall") {
		t.Errorf("doctor away from the LAN:\n%s", doctor)
	}

	// Back on the LAN it answers again, and nothing is said of it.
	if err := w.lab.Uplink(ctx, laptop, lab.LAN); err != nil {
		t.Fatal(err)
	}
	w.waitStatus(laptop, 60*time.Second, "ky3 up again from the LAN", upOn("", "ky3"))
	if status := w.stdout(laptop, nil, "runos", "vpn", "status"); strings.Contains(status, "is private") {
		t.Errorf("status back on the LAN:\n%s", status)
	}
}
