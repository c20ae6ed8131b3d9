package relay

import (
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/relaywire"
)

// clock is the injected time of the decider tests.
type clock struct{ now time.Time }

func (c *clock) at(d time.Duration) time.Time { return c.now.Add(d) }
func (c *clock) add(d time.Duration) time.Time {
	c.now = c.now.Add(d)
	return c.now
}

var t0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

const dataLen = 96 // a small transport message with something in it

func newTestDecider(hasRelay bool) (*decider, *clock) {
	c := &clock{now: t0}
	return newDecider(DefaultTiming, hasRelay, c.now), c
}

// tickUntil ticks every 100 ms (as the Bind does) until f holds, at most
// limit, and returns how long it took and what the ticks asked.
func tickUntil(d *decider, c *clock, limit time.Duration, f func(actions) bool) (time.Duration, actions, bool) {
	var all actions
	for el := time.Duration(0); el <= limit; el += 100 * time.Millisecond {
		a := d.tick(c.now)
		all.switched = all.switched || a.switched
		all.probe = all.probe || a.probe
		all.resendInit = all.resendInit || a.resendInit
		if f(a) {
			return el, all, true
		}
		c.add(100 * time.Millisecond)
	}
	return limit, all, false
}

func TestUDPAnswersStaysDirect(t *testing.T) {
	d, c := newTestDecider(true)
	udp, relay := d.route(c.now, relaywire.MsgInitiation, 148)
	if !udp || relay {
		t.Fatalf("first initiation: udp %v relay %v", udp, relay)
	}
	d.received(c.add(3*time.Millisecond), relaywire.MsgResponse, false)
	for range 100 { // a minute of traffic, answered
		d.route(c.add(300*time.Millisecond), relaywire.MsgData, dataLen)
		d.received(c.add(5*time.Millisecond), relaywire.MsgData, false)
		if a := d.tick(c.now); a != (actions{}) {
			t.Fatalf("tick asked %+v while UDP answers", a)
		}
	}
	if d.path != Direct || d.wantRelay(c.now) {
		t.Errorf("path %s, relay wanted %v", d.path, d.wantRelay(c.now))
	}
}

func TestNoAnswerFallsBackAfter2500ms(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	// wireguard-go's peer nudges send more initiations meanwhile: the wait
	// counts from the first.
	c.add(100 * time.Millisecond)
	d.route(c.now, relaywire.MsgInitiation, 148)
	c.now = t0
	el, all, ok := tickUntil(d, c, 5*time.Second, func(a actions) bool { return a.switched })
	if !ok || el != 2500*time.Millisecond {
		t.Fatalf("switched %v after %s, want after 2.5s", ok, el)
	}
	if d.path != Relay || !all.resendInit || !strings.Contains(d.reason, "no answer over UDP for 2.5s") {
		t.Errorf("path %s reason %q actions %+v", d.path, d.reason, all)
	}
	if !d.wantRelay(c.now) {
		t.Error("relayed without wanting the relay connection")
	}
	// The relay connection is wanted before the switch, to be ready.
	d2, c2 := newTestDecider(true)
	d2.route(c2.now, relaywire.MsgInitiation, 148)
	if d2.wantRelay(c2.at(time.Second)) || !d2.wantRelay(c2.at(1300*time.Millisecond)) {
		t.Error("the relay connection is not warmed half-way to the fall back")
	}
}

func TestNoRelayNoFallBack(t *testing.T) {
	d, c := newTestDecider(false)
	d.route(c.now, relaywire.MsgInitiation, 148)
	if _, _, ok := tickUntil(d, c, 30*time.Second, func(a actions) bool { return a.switched }); ok || d.path != Direct {
		t.Error("fell back with no relay to fall back to")
	}
	if d.wantRelay(c.now) {
		t.Error("wants a relay it does not have")
	}
}

func TestSilenceProbesThenFallsBack(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(2*time.Millisecond), relaywire.MsgResponse, false)
	c.add(30 * time.Second)
	// UDP is blocked from here: pings every 100 ms, nothing comes back.
	start := c.now
	var probedAt, switchedAt time.Duration
	for el := time.Duration(0); el < 10*time.Second && switchedAt == 0; el += 100 * time.Millisecond {
		d.route(c.now, relaywire.MsgData, dataLen)
		a := d.tick(c.now)
		if a.probe {
			probedAt = c.now.Sub(start)
			// wireguard-go sends the initiation the probe asks for.
			d.route(c.now, relaywire.MsgInitiation, 148)
		}
		if a.switched {
			switchedAt = c.now.Sub(start)
		}
		c.add(100 * time.Millisecond)
	}
	if probedAt != 1500*time.Millisecond {
		t.Errorf("probed after %s of silence, want 1.5s", probedAt)
	}
	if switchedAt != 2500*time.Millisecond || d.path != Relay {
		t.Errorf("switched after %s (path %s), want 2.5s: the probe's initiation unanswered for 1s", switchedAt, d.path)
	}
}

func TestSilenceWithoutInitiationStillFallsBack(t *testing.T) {
	// The probe asked for no initiation (wireguard-go had sent one less
	// than 5 s before): the silence alone decides, a little later.
	d, c := newTestDecider(true)
	d.received(c.now, relaywire.MsgResponse, false)
	start := c.now
	var switchedAt time.Duration
	for el := time.Duration(0); el < 10*time.Second && switchedAt == 0; el += 100 * time.Millisecond {
		d.route(c.now, relaywire.MsgData, dataLen)
		if d.tick(c.now).switched {
			switchedAt = c.now.Sub(start)
		}
		c.add(100 * time.Millisecond)
	}
	if switchedAt != 2500*time.Millisecond {
		t.Errorf("switched after %s, want 2.5s", switchedAt)
	}
}

func TestKeepalivesAreNotSilence(t *testing.T) {
	d, c := newTestDecider(true)
	d.received(c.now, relaywire.MsgResponse, false)
	for range 10 { // an idle tunnel: a keepalive every 25 s, never answered
		d.route(c.add(25*time.Second), relaywire.MsgData, keepaliveLen)
		if _, _, ok := tickUntil(d, c, 5*time.Second, func(a actions) bool { return a.probe || a.switched }); ok {
			t.Fatal("an unanswered keepalive started a probe")
		}
	}
}

func TestRelayedProbesAndComesBack(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	tickUntil(d, c, 5*time.Second, func(a actions) bool { return a.switched })
	// Over the relay: the first handshake is urgent (none yet).
	if udp, relay := d.route(c.now, relaywire.MsgInitiation, 148); udp || !relay {
		t.Fatalf("first initiation while relayed: udp %v relay %v, want the relay", udp, relay)
	}
	d.received(c.add(5*time.Millisecond), relaywire.MsgResponse, true)
	if udp, relay := d.route(c.now, relaywire.MsgData, dataLen); udp || !relay {
		t.Fatal("data does not go over the relay")
	}
	// Probes every 5 s; their initiations go to UDP only while the last
	// handshake is younger than a minute.
	el, _, ok := tickUntil(d, c, 10*time.Second, func(a actions) bool { return a.probe })
	if !ok || el > 5100*time.Millisecond {
		t.Fatalf("first probe after %s", el)
	}
	if udp, relay := d.route(c.now, relaywire.MsgInitiation, 148); !udp || relay {
		t.Fatalf("probe initiation: udp %v relay %v, want UDP only", udp, relay)
	}
	// UDP still blocked; a minute on, an initiation needs the relay again.
	c.add(61 * time.Second)
	if udp, relay := d.route(c.now, relaywire.MsgInitiation, 148); udp || !relay {
		t.Fatalf("initiation a minute after the last handshake: udp %v relay %v, want the relay", udp, relay)
	}
	d.received(c.add(5*time.Millisecond), relaywire.MsgResponse, true)
	// UDP comes back: the next probe's answer arrives over UDP.
	d.route(c.add(5*time.Second), relaywire.MsgInitiation, 148)
	d.received(c.add(3*time.Millisecond), relaywire.MsgResponse, false)
	if d.path != Direct || d.reason != "a handshake over UDP succeeded" {
		t.Fatalf("path %s (%s) after a UDP handshake", d.path, d.reason)
	}
	if udp, relay := d.route(c.now, relaywire.MsgData, dataLen); !udp || relay {
		t.Error("data not back on UDP")
	}
	// The relay connection stays warm a while, then goes.
	if !d.wantRelay(c.at(30*time.Second)) || d.wantRelay(c.at(61*time.Second)) {
		t.Error("relay connection not kept warm for a minute, or kept longer")
	}
}

func TestOnlyAHandshakeOverUDPSwitchesBack(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	tickUntil(d, c, 5*time.Second, func(a actions) bool { return a.switched })
	for _, typ := range []byte{relaywire.MsgData, relaywire.MsgCookie, relaywire.MsgInitiation} {
		if d.received(c.add(time.Millisecond), typ, false) || d.path != Relay {
			t.Errorf("a type-%d datagram over UDP switched back", typ)
		}
	}
	if d.received(c.add(time.Millisecond), relaywire.MsgResponse, true) || d.path != Relay {
		t.Error("a handshake over the relay switched to direct")
	}
}

func TestNetworkChange(t *testing.T) {
	// Direct: after a change, a handshake unanswered for 1 s is enough.
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(time.Millisecond), relaywire.MsgResponse, false)
	c.add(time.Minute)
	d.networkChanged(c.now)
	if !d.wantRelay(c.now) {
		t.Error("the relay connection is not readied after a network change")
	}
	d.route(c.now, relaywire.MsgInitiation, 148) // the daemon re-handshakes at once
	el, _, ok := tickUntil(d, c, 5*time.Second, func(a actions) bool { return a.switched })
	if !ok || el != time.Second {
		t.Errorf("after a network change: switched %v after %s, want 1s", ok, el)
	}
	// Relayed: the engine's new handshake goes over the relay (even one a
	// moment after the last); the UDP probe follows as soon as
	// wireguard-go would send another initiation (5 s).
	d.received(c.add(time.Millisecond), relaywire.MsgResponse, true)
	c.add(time.Second)
	d.networkChanged(c.now)
	if udp, relay := d.route(c.now, relaywire.MsgInitiation, 148); udp || !relay {
		t.Errorf("relayed, network changed: initiation udp %v relay %v, want the relay", udp, relay)
	}
	d.received(c.add(time.Millisecond), relaywire.MsgResponse, true)
	if el, _, ok := tickUntil(d, c, 10*time.Second, func(a actions) bool { return a.probe }); !ok || el > 5100*time.Millisecond {
		t.Errorf("relayed, network changed: probe after %s, want 5 s after the engine's initiation", el)
	}
	// Direct and answering after the change: nothing happens.
	d2, c2 := newTestDecider(true)
	d2.networkChanged(c2.now)
	d2.route(c2.now, relaywire.MsgInitiation, 148)
	d2.received(c2.add(20*time.Millisecond), relaywire.MsgResponse, false)
	if _, _, ok := tickUntil(d2, c2, 5*time.Second, func(a actions) bool { return a.switched }); ok {
		t.Error("switched although UDP answered after the change")
	}
}

// TestNextDeadline: the Bind sleeps until the decider's next deadline,
// which must be each instant at which tick would act.
func TestNextDeadline(t *testing.T) {
	d, c := newTestDecider(true)
	if !d.next(c.now).IsZero() {
		t.Error("a fresh decider has a deadline")
	}
	d.route(c.now, relaywire.MsgInitiation, 148)
	if got := d.next(c.now); !got.Equal(t0.Add(1250 * time.Millisecond)) {
		t.Errorf("after an initiation: next %v, want +1.25s (ready the relay)", got.Sub(t0))
	}
	if got := d.next(t0.Add(1250 * time.Millisecond)); !got.Equal(t0.Add(2500 * time.Millisecond)) {
		t.Errorf("then %v, want +2.5s (fall back)", got.Sub(t0))
	}
	if a := d.tick(t0.Add(2500 * time.Millisecond)); !a.switched {
		t.Error("not switched at the deadline")
	}
	if got := d.next(t0.Add(2500 * time.Millisecond)); !got.Equal(t0.Add(7500 * time.Millisecond)) {
		t.Errorf("relayed: next %v, want the first probe at +7.5s", got.Sub(t0))
	}
	// No relay: nothing to time but nothing.
	d2, c2 := newTestDecider(false)
	d2.route(c2.now, relaywire.MsgInitiation, 148)
	if !d2.next(c2.now).IsZero() {
		t.Error("a decider with no relay has a deadline")
	}
}

// TestSilenceSoonAfterAProbe: UDP goes away a moment after a probe found it
// again (the last handshake is recent, so wireguard-go sends no new one):
// the silence alone still decides within 2.5 s.
func TestSilenceSoonAfterAProbe(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	tickUntil(d, c, 5*time.Second, func(a actions) bool { return a.switched })
	_, _, _ = tickUntil(d, c, 10*time.Second, func(a actions) bool { return a.probe })
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(2*time.Millisecond), relaywire.MsgResponse, false) // back on UDP
	c.add(time.Second)
	start := c.now
	var switchedAt time.Duration
	for el := time.Duration(0); el < 10*time.Second && switchedAt == 0; el += 100 * time.Millisecond {
		d.route(c.now, relaywire.MsgData, dataLen)
		if d.tick(c.now).switched {
			switchedAt = c.now.Sub(start)
		}
		c.add(100 * time.Millisecond)
	}
	if switchedAt != 2500*time.Millisecond {
		t.Errorf("switched %s after UDP went away a second after a probe, want 2.5s", switchedAt)
	}
}
