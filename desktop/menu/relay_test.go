package menu

import (
	"strings"
	"testing"

	"github.com/runos/vpn/vpnd/localapi"
)

// TestRelayedRow: a cluster whose traffic goes over its node's relay says
// so in its row ("ky3 (relayed)") and why in its tooltip; a captive portal
// is said in the menu, as the daemon words it.
func TestRelayedRow(t *testing.T) {
	ky3 := cluster("ky3", localapi.ClusterConnected, true, true)
	ky3.Path, ky3.Relay, ky3.PathReason = localapi.PathRelay, "https://10.77.0.21/runos-vpn/relay", "a handshake initiation got no answer over UDP for 2.5s"
	xym := cluster("xym", localapi.ClusterConnected, true, true)
	xym.Path = localapi.PathDirect
	s, _ := run(t, State{}, StatusEvent{status(3, localapi.SessionSignedIn, ky3, xym)})
	m := Build(s, now)
	if m.Clusters[0].Title != "ky3 (relayed)" || !m.Clusters[0].Checked || m.Clusters[1].Title != "xym" {
		t.Fatalf("rows %q", titles(m.Clusters))
	}
	if !strings.Contains(m.Clusters[0].Tooltip, "over its HTTPS relay (https://10.77.0.21/runos-vpn/relay): a handshake initiation got no answer") {
		t.Errorf("tooltip %q", m.Clusters[0].Tooltip)
	}
	if m.Icon != IconConnected {
		t.Errorf("a relayed cluster is trouble: icon %v", m.Icon)
	}

	// UDP and the relay both held back by a captive portal.
	ky3.PeerUp = false
	ky3.Error = "the network needs a sign-in page first (http://portal.lab)"
	st := status(4, localapi.SessionSignedIn, ky3)
	st.Warnings = []localapi.Warning{{Code: localapi.WarnCaptivePortal,
		Message: "the network needs a sign-in page first (http://portal.lab): open any web page in a browser to sign in to the network"}}
	s, _ = run(t, State{}, StatusEvent{st})
	m = Build(s, now)
	if !strings.HasPrefix(m.Clusters[0].Title, "ky3 (relayed) — the network needs a sign-in page first") {
		t.Errorf("row %q", m.Clusters[0].Title)
	}
	if got := strings.Join(titles(m.Notices), " "); !strings.Contains(got, "the network needs a sign-in page first") {
		t.Errorf("notices %q", got)
	}
}
