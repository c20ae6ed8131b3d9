//go:build !windows

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// TestSessionLapse: with a short --session-ttl the session lapses on its
// own: the gateway drops the peer at once (stock wg show on the node), the
// laptop shows expired; `vpn up` signs in again in the browser and brings
// back the clusters that were connected.
func TestSessionLapse(t *testing.T) {
	const ttl = 25 * time.Second
	w := newWorld(t, 1, ttl)
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.must(laptop, nil, "runos", "vpn", "connect", "xym")
	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3 and xym", upOn("", "ky3", "xym"))
	pub := st.Tunnel.PublicKey
	if !strings.Contains(w.gatewayPeers("ky3-n1"), pub) {
		t.Fatal("ky3-n1 does not list the laptop")
	}
	if left := time.Until(st.Session.ExpiresAt); left > ttl+time.Second || left <= 0 {
		t.Fatalf("session expires in %s, want about %s", left, ttl)
	}

	st = w.waitStatus(laptop, ttl+30*time.Second, "expired", func(s *localapi.Status) bool {
		return s.Session.State == localapi.SessionExpired
	})
	for _, cid := range []string{"ky3", "xym"} {
		if c, _ := cluster(st, cid); c.PeerUp || c.State == localapi.ClusterConnected {
			t.Errorf("%s still up after the session lapsed: %+v", cid, c)
		}
	}
	for _, h := range []string{"ky3-n1", "xym-n1"} {
		w.waitFor(5*time.Second, "peer gone from "+h+" after the lapse", func() bool {
			return !strings.Contains(w.gatewayPeers(h), pub)
		})
	}

	// Sign in again: the lab's scripted browser runs, both clusters return.
	launchesBefore := w.browserLaunches(laptop)
	w.must(laptop, nil, "runos", "vpn", "up")
	if w.browserLaunches(laptop) != launchesBefore+1 {
		t.Error("vpn up after the lapse did not sign in through the browser")
	}
	st = w.waitStatus(laptop, 20*time.Second, "restored ky3 and xym", upOn("", "ky3", "xym"))
	if st.Session.State != localapi.SessionSignedIn {
		t.Errorf("session %q after signing in again", st.Session.State)
	}
}
