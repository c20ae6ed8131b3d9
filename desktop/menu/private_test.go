package menu

import (
	"strings"
	"testing"

	"github.com/runos/vpn/vpnd/localapi"
)

// The row of a cluster whose server does not answer at a private ingress
// address says what status and doctor say; a public address or an
// answering server adds nothing.
func TestPrivateIngressRow(t *testing.T) {
	c := localapi.ClusterStatus{CID: "ky3", State: localapi.ClusterConnected, Wanted: true,
		Error:  "no answer from n1 at 10.77.0.21:32768 for 17 s",
		Server: localapi.Server{NodeID: "n1", Endpoint: "10.77.0.21:32768"}}
	hotspot := localapi.Network{Uplink: "default via 172.20.10.1 dev wlan0 mtu 1500; addresses 172.20.10.5/28@wlan0"}
	s := State{Link: LinkUp, Status: &localapi.Status{Session: localapi.Session{State: localapi.SessionSignedIn}, Network: hotspot, Clusters: []localapi.ClusterStatus{c}}}
	it := clusterRow(s, c)
	if want := "ky3 — private address 10.77.0.21: reachable only from its own network"; it.Title != want {
		t.Errorf("row %q, want %q", it.Title, want)
	}
	if !strings.Contains(it.Tooltip, "give the node a reachable ingress address") {
		t.Errorf("tooltip %q", it.Tooltip)
	}
	pub := c
	pub.Server.Endpoint, pub.Error = "203.0.113.7:32768", "no answer from n1 at 203.0.113.7:32768 for 17 s"
	if it := clusterRow(s, pub); strings.Contains(it.Title, "private") || strings.Contains(it.Tooltip, "private") {
		t.Errorf("public address: %q / %q", it.Title, it.Tooltip)
	}
	up := c
	up.PeerUp, up.Error = true, ""
	if it := clusterRow(s, up); strings.Contains(it.Title, "private") {
		t.Errorf("answering server: %q", it.Title)
	}
	// On the node's network (or with the addresses unknown) the silence
	// is something else: the daemon's words stay.
	for _, uplink := range []string{"no default route; addresses 10.77.0.101/24@lan0 198.51.100.101/24@wan0", ""} {
		s.Status.Network.Uplink = uplink
		if it := clusterRow(s, c); it.Title != "ky3 — "+c.Error {
			t.Errorf("uplink %q: row %q", uplink, it.Title)
		}
	}
}
