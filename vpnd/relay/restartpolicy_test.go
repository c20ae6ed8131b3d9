package relay

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runos/vpn/internal/relaywire"
)

// TestServerRestartWhileRelayedRacesAgain is the soak's flake: the server
// was down (UDP unanswered, its relay refused), so the path went to the
// relay with no handshake; the server starts again and the daemon
// re-creates the peer. Its initiation must race UDP and the relay as a
// new connect's does (UDP's head start, then both ways), not go over the
// stale relay alone, and UDP's answer keeps the path direct.
func TestServerRestartWhileRelayedRacesAgain(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	if _, _, ok := tickUntil(d, c, 10*time.Second, func(a actions) bool { return a.switched }); !ok || d.path != Relay {
		t.Fatalf("not relayed after a race nobody answered: path %s", d.path)
	}
	c.add(30 * time.Second) // the server is down
	if !d.serverRestarted(c.now) || d.path != Direct || d.since != c.now || !strings.Contains(d.reason, "VPN server restarted") {
		t.Fatalf("after the restart: path %s since %v (%s), want a switch to direct now", d.path, d.since.Sub(t0), d.reason)
	}
	// The re-created peer's initiation, at once: UDP's head start first.
	if udp, relay := d.route(c.now, relaywire.MsgInitiation, 148); !udp || relay {
		t.Fatalf("the restarted server's first initiation: udp %v relay %v, want UDP first", udp, relay)
	}
	el, all, ok := tickUntil(d, c, time.Second, func(a actions) bool { return a.raced })
	if !ok || el != 200*time.Millisecond || !all.resendInit || all.switched || !d.wantRelay(c.now) {
		t.Fatalf("raced %v after %s (head start 150ms, ticks every 100ms), actions %+v, relay wanted %v", ok, el, all, d.wantRelay(c.now))
	}
	if udp, relay := d.route(c.add(10*time.Millisecond), relaywire.MsgInitiation, 148); !udp || !relay {
		t.Errorf("an initiation while racing: udp %v relay %v, want both", udp, relay)
	}
	if d.received(c.add(20*time.Millisecond), relaywire.MsgResponse, false) || d.path != Direct || d.racing() {
		t.Fatalf("UDP answered: path %s racing %v", d.path, d.racing())
	}
	if udp, relay := d.route(c.now, relaywire.MsgData, dataLen); !udp || relay {
		t.Error("data does not go over UDP after it answered the restarted server")
	}
}

// TestServerRestartWhileRelayedRelayAnswers: UDP is blocked for real; after
// the restart the race is the relay's again.
func TestServerRestartWhileRelayedRelayAnswers(t *testing.T) {
	d, c := newTestDecider(true)
	relayedByRace(t, d, c, relaywire.MsgResponse)
	c.add(10 * time.Second)
	if !d.serverRestarted(c.now) || d.path != Direct {
		t.Fatalf("after the restart: path %s", d.path)
	}
	d.route(c.now, relaywire.MsgInitiation, 148)
	if _, all, ok := tickUntil(d, c, time.Second, func(a actions) bool { return a.raced }); !ok || !all.resendInit {
		t.Fatalf("no race for the restarted server's initiation: %+v", all)
	}
	if !d.received(c.add(30*time.Millisecond), relaywire.MsgResponse, true) || d.path != Relay {
		t.Fatalf("the relay answered first but path %s", d.path)
	}
	if !strings.Contains(d.reason, "the relay answered first") {
		t.Errorf("reason %q", d.reason)
	}
	if udp, relay := d.route(c.now, relaywire.MsgData, dataLen); udp || !relay {
		t.Error("data does not go over the relay once it won")
	}
}

// TestServerRestartForgetsTheHandshake: relayed with a handshake 10 s old,
// the server restarts and the race goes to the relay on an answer that is
// no handshake (a cookie: the server is loaded). The old handshake was
// with the old server: the next initiation must go over the relay, not to
// UDP alone as a probe would while a handshake is fresh.
func TestServerRestartForgetsTheHandshake(t *testing.T) {
	d, c := newTestDecider(true)
	relayedByRace(t, d, c, relaywire.MsgResponse)
	c.add(10 * time.Second)
	d.serverRestarted(c.now)
	d.route(c.now, relaywire.MsgInitiation, 148)
	tickUntil(d, c, time.Second, func(a actions) bool { return a.raced })
	if !d.received(c.add(30*time.Millisecond), relaywire.MsgCookie, true) || d.path != Relay {
		t.Fatalf("the relay answered first but path %s", d.path)
	}
	if udp, relay := d.route(c.add(5*time.Second), relaywire.MsgInitiation, 148); udp || !relay {
		t.Errorf("an initiation with no handshake from the restarted server: udp %v relay %v, want the relay", udp, relay)
	}
}

// TestServerRestartWhileDirect: the path is direct and a silence race is
// under way (the server was down); the restart ends that race without a
// switch, and the new server's initiation gets UDP's head start.
func TestServerRestartWhileDirect(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(2*time.Millisecond), relaywire.MsgResponse, false)
	since := d.since
	d.route(c.add(time.Second), relaywire.MsgData, dataLen)
	if _, _, ok := tickUntil(d, c, time.Second, func(a actions) bool { return a.raced }); !ok {
		t.Fatal("no race on the silence")
	}
	if d.serverRestarted(c.add(time.Second)) || d.path != Direct || d.racing() || d.since != since {
		t.Fatalf("after the restart: path %s racing %v since %v, want direct as before, no race", d.path, d.racing(), d.since.Sub(t0))
	}
	d.route(c.now, relaywire.MsgInitiation, 148)
	if got := d.next(c.now); got != c.at(DefaultTiming.RaceAfter) {
		t.Errorf("next %v after the restarted server's initiation, want UDP's head start", got.Sub(c.now))
	}
}

// TestServerRestartedOpensOnlyThatCluster: the Bind reopens the path of
// the clusters named, forgets the initiations kept for the old server and
// tells the daemon of the switch (which counts it); another cluster keeps
// its relay, and a cluster already direct is no switch to tell.
func TestServerRestartedOpensOnlyThatCluster(t *testing.T) {
	clk := &syncClock{now: t0}
	var changes atomic.Int32
	b := New(Config{Inner: nullBind{}, Now: clk.Now, Log: slog.New(slog.DiscardHandler),
		// No dial ends while the test runs: its only change notices are
		// the ones under test.
		Ticket: func(ctx context.Context, _ string) (string, time.Time, error) {
			<-ctx.Done()
			return "", time.Time{}, ctx.Err()
		},
		Captive:  func(context.Context, string) (string, bool) { return "", false },
		OnChange: func() { changes.Add(1) },
	})
	defer b.Stop()
	ky3 := netip.MustParseAddrPort("10.77.0.21:32768")
	xym := netip.MustParseAddrPort("198.51.100.31:32768")
	b.SetDests([]Dest{{CID: "ky3", Endpoint: ky3, RelayURL: "https://10.77.0.21/runos-vpn/relay"},
		{CID: "xym", Endpoint: xym, RelayURL: "https://198.51.100.31/runos-vpn/relay"}})
	for _, d := range *b.dests.Load() {
		d.mu.Lock()
		d.dec.switchTo(clk.Now(), Relay, "test")
		d.lastInit, d.pendingInit = []byte{1, 0, 0, 0}, []byte{1, 0, 0, 0}
		d.mu.Unlock()
	}
	clk.add(time.Minute)
	b.ServerRestarted("ky3")
	if n := changes.Load(); n != 1 {
		t.Errorf("%d change notices for one switch, want 1", n)
	}
	for _, st := range b.States() {
		switch st.CID {
		case "ky3":
			if st.Path != Direct || !st.Since.Equal(clk.Now()) || !strings.Contains(st.Reason, "VPN server restarted") {
				t.Errorf("ky3 after its server restarted: %+v", st)
			}
		case "xym":
			if st.Path != Relay || st.Reason != "test" {
				t.Errorf("xym, whose server did not restart: %+v", st)
			}
		}
	}
	d := (*b.dests.Load())[ky3]
	d.mu.Lock()
	kept := d.lastInit != nil || d.pendingInit != nil
	d.mu.Unlock()
	if kept {
		t.Error("an initiation to the old server is kept to resend to the new one")
	}
	b.ServerRestarted("ky3") // direct already: the question is open, no switch
	if n := changes.Load(); n != 1 {
		t.Errorf("%d change notices after a restart while direct, want still 1", n)
	}
}
