package relay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/relay"
)

// relayDown starts a pair with the node's relay refusing streams.
func relayDown(p *pair) { p.down.Store(true) }

// gatewayDies is the node's gateway killed: its relay streams break and
// the relay refuses new ones until it is back (restarts).
func (p *pair) gatewayDies() {
	p.down.Store(true)
	p.gw.CloseStreams("the gateway stopped")
}

// restarts is the node's gateway started again: its WireGuard server has
// forgotten the laptop's session (the peer is configured afresh, with no
// handshake) and its relay serves again. Then the laptop does what the
// daemon's tunnel does on the new epoch (tunnel.Engine.Apply): the Bind
// is told first, then the peer is re-created in one transaction, which
// sends an initiation at once.
func (p *pair) restarts() {
	p.t.Helper()
	ipc(p.t, p.server, fmt.Sprintf("public_key=%s\nremove=true\npublic_key=%s\nallowed_ip=%s/32\n",
		hexKey(p.lkey.PublicKey()), hexKey(p.lkey.PublicKey()), laptopIP))
	p.down.Store(false)
	p.bind.ServerRestarted("ky3")
	ipc(p.t, p.laptop, fmt.Sprintf("public_key=%s\nremove=true\npublic_key=%s\nendpoint=%s\nallowed_ip=%s/32\npersistent_keepalive_interval=25\n",
		hexKey(p.skey.PublicKey()), hexKey(p.skey.PublicKey()), p.ep, serverIP))
}

// waitRefused waits until the relay refused n dials while down.
func (p *pair) waitRefused(n int32, timeout time.Duration) {
	p.t.Helper()
	deadline := time.After(timeout)
	for p.refused.Load() < n {
		select {
		case <-p.changed: // a failed dial tells the daemon
		case <-deadline:
			p.t.Fatalf("the relay refused %d dials in %s, want %d (%+v)", p.refused.Load(), timeout, n, p.path())
		}
	}
}

// TestServerRestartAfterAnOutageGoesDirect is the soak's flake in process:
// the server is down (nothing answers over UDP, its relay refuses), so the
// path goes to the relay with no handshake, the relay's dials backing
// off; the server starts again and UDP answers again. The re-created
// peer's initiation races as a connect's does and UDP's answer carries
// the tunnel at once, not the relay after its backoff nor UDP after the
// next probe (5 s).
func TestServerRestartAfterAnOutageGoesDirect(t *testing.T) {
	p := newPair(t, true, "tok", relayDown)
	p.ping()
	p.waitPath(relay.Relay, 10*time.Second) // the race's 5 s, nobody answering
	if st := p.path(); !strings.Contains(st.Reason, "nor over the relay") {
		t.Fatalf("relayed for another reason: %+v", st)
	}
	p.waitRefused(2, 10*time.Second)
	p.udp.blocked.Store(false) // the restarted server listens again
	restarted := time.Now()
	p.restarts()
	drain(p.replies)
	if !p.waitReply(5 * time.Second) {
		t.Fatalf("no reply within 5 s of the restart; state %+v", p.path())
	}
	took := time.Since(restarted)
	st := p.path()
	t.Logf("a reply %s after the restart, path %s (%s)", took.Round(time.Millisecond), st.Path, st.Reason)
	// A handshake over UDP and a round trip: a bound generous for a
	// loaded machine, well short of the 5 s probe the flake waited for.
	if st.Path != relay.Direct || took > 2*time.Second {
		t.Errorf("a reply %s after the restart over %s, want within 2 s over UDP", took, st.Path)
	}
}

// TestServerRestartWhileRelayedStaysRelayed: UDP is blocked for real and
// the cluster relayed when its gateway dies; the restarted server's first
// handshake races again, the relay is dialled at once (not after the
// backoff of its refusals) and wins, and the tunnel carries traffic over
// it again.
func TestServerRestartWhileRelayedStaysRelayed(t *testing.T) {
	p := newPair(t, true, "tok")
	p.ping()
	p.waitPath(relay.Relay, 10*time.Second)
	if !p.waitReply(10 * time.Second) {
		t.Fatalf("no reply over the relay; state %+v", p.path())
	}
	p.gatewayDies()
	p.waitRefused(1, 10*time.Second)
	restarted := time.Now()
	p.restarts()
	if st := p.path(); st.Path != relay.Direct || !strings.Contains(st.Reason, "VPN server restarted") {
		t.Fatalf("after the restart: %+v, want the question open (direct, UDP first)", st)
	}
	drain(p.replies)
	if !p.waitReply(5 * time.Second) {
		t.Fatalf("no reply within 5 s of the restart; state %+v", p.path())
	}
	took := time.Since(restarted)
	st := p.path()
	t.Logf("a reply %s after the restart, path %s (%s)", took.Round(time.Millisecond), st.Path, st.Reason)
	// UDP's head start, a dial and a handshake over the relay.
	if st.Path != relay.Relay || !strings.Contains(st.Reason, "the relay answered first") || took > 3*time.Second {
		t.Errorf("a reply %s after the restart over %s (%s), want within 3 s over the relay", took, st.Path, st.Reason)
	}
}
