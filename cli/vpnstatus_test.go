package cli

import (
	"testing"

	"github.com/runos/vpn/vpnd/localapi"
)

// The Tunnel line in each state: the interface being up is not the
// tunnel being up; after runos vpn down it says down, and why.
func TestTunnelWording(t *testing.T) {
	up := localapi.Tunnel{Interface: "wg1", Up: true, Addresses: []string{"100.96.0.2/32"}}
	signedIn := localapi.Session{State: localapi.SessionSignedIn}
	cluster := func(state string) []localapi.ClusterStatus {
		return []localapi.ClusterStatus{{CID: "ky3", State: state}}
	}
	for _, tc := range []struct {
		name string
		st   localapi.Status
		want string
	}{
		{"connected", localapi.Status{Tunnel: up, Session: signedIn, Clusters: cluster(localapi.ClusterConnected)}, "wg1 up, 100.96.0.2/32"},
		{"connecting", localapi.Status{Tunnel: up, Session: signedIn, Clusters: cluster(localapi.ClusterConnecting)}, "wg1 up, 100.96.0.2/32"},
		{"after vpn down", localapi.Status{Tunnel: up, Session: localapi.Session{State: localapi.SessionSignedOut}}, "down: signed out (wg1 carries nothing until runos vpn up)"},
		{"expired", localapi.Status{Tunnel: up, Session: localapi.Session{State: localapi.SessionExpired}, Clusters: cluster(localapi.ClusterDisconnected)}, "down: signed out (wg1 carries nothing until runos vpn up)"},
		{"signed in, all disconnected", localapi.Status{Tunnel: up, Session: signedIn, Clusters: cluster(localapi.ClusterDisconnected)}, "down: no cluster connected (runos vpn connect <cid>)"},
		{"signed in, none", localapi.Status{Tunnel: up, Session: signedIn}, "down: no cluster connected (runos vpn connect <cid>)"},
		{"interface down", localapi.Status{Tunnel: localapi.Tunnel{Interface: "wg1"}, Session: signedIn, Clusters: cluster(localapi.ClusterConnected)}, "wg1 down"},
		{"no interface yet", localapi.Status{}, "wg1 down"},
	} {
		if got := tunnelLines(&tc.st); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	st := localapi.Status{Tunnel: localapi.Tunnel{Error: "create wg1: operation not permitted"}}
	if got := tunnelLines(&st); len(got) != 2 || got[1] != "error: create wg1: operation not permitted" {
		t.Errorf("error: %q", got)
	}
}
