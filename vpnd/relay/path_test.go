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
		all.keepalive = all.keepalive || a.keepalive
		all.resendInit = all.resendInit || a.resendInit
		all.ask = all.ask || a.ask
		all.raced = all.raced || a.raced
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

// TestUDPFirst: UDP answers inside its head start; the relay is never
// tried, not even dialled.
func TestUDPFirst(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	if d.next(c.now) != c.at(150*time.Millisecond) {
		t.Errorf("next %v, want the end of UDP's head start", d.next(c.now).Sub(c.now))
	}
	d.received(c.add(40*time.Millisecond), relaywire.MsgResponse, false)
	if _, all, _ := tickUntil(d, c, 5*time.Second, func(actions) bool { return false }); all != (actions{}) || d.wantRelay(c.now) {
		t.Errorf("ticks asked %+v, relay wanted %v after UDP answered", all, d.wantRelay(c.now))
	}
}

// TestRelayFirst: UDP is blocked from the start; after UDP's head start the
// initiation also goes over the relay, and its answer there switches.
func TestRelayFirst(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	if d.wantRelay(c.at(100 * time.Millisecond)) {
		t.Error("the relay is wanted inside UDP's head start")
	}
	el, all, ok := tickUntil(d, c, time.Second, func(a actions) bool { return a.raced })
	if !ok || el != 200*time.Millisecond || !all.resendInit || all.switched {
		t.Fatalf("raced %v after %s (ticks every 100ms, head start 150ms), actions %+v", ok, el, all)
	}
	if !d.wantRelay(c.now) || d.path != Direct {
		t.Fatalf("racing: relay wanted %v, path %s", d.wantRelay(c.now), d.path)
	}
	// wireguard-go's next initiation goes both ways while racing.
	if udp, relay := d.route(c.add(10*time.Millisecond), relaywire.MsgInitiation, 148); !udp || !relay {
		t.Errorf("initiation while racing: udp %v relay %v, want both", udp, relay)
	}
	if !d.received(c.add(60*time.Millisecond), relaywire.MsgResponse, true) || d.path != Relay {
		t.Fatalf("the relay's answer did not switch: path %s", d.path)
	}
	if !strings.Contains(d.reason, "the relay answered first: nothing over UDP for 270ms") {
		t.Errorf("reason %q", d.reason)
	}
	if udp, relay := d.route(c.now, relaywire.MsgData, dataLen); udp || !relay {
		t.Error("data does not go over the relay once it won")
	}
}

// TestUDPWinsTheRace: UDP is slow but answers while the relay is tried:
// UDP keeps the peer.
func TestUDPWinsTheRace(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	tickUntil(d, c, time.Second, func(a actions) bool { return a.raced })
	if d.received(c.add(30*time.Millisecond), relaywire.MsgResponse, false) || d.path != Direct || d.racing() {
		t.Fatalf("path %s racing %v after UDP answered", d.path, d.racing())
	}
	// A late copy over the relay (the server had taken UDP's) changes nothing.
	if d.received(c.add(30*time.Millisecond), relaywire.MsgData, true) || d.path != Direct {
		t.Error("a late datagram over the relay switched after UDP won")
	}
	if udp, relay := d.route(c.now, relaywire.MsgData, dataLen); !udp || relay {
		t.Error("data still goes over the relay after UDP won")
	}
}

// TestNeitherAnswersAHandshake: the relay is not reached either (refused,
// or slow to connect): the path is the relay's after RaceFor, so the
// status shows why the relay fails.
func TestNeitherAnswersAHandshake(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	el, _, ok := tickUntil(d, c, 10*time.Second, func(a actions) bool { return a.switched })
	if !ok || el != 5200*time.Millisecond || d.path != Relay {
		t.Fatalf("switched %v after %s, path %s; want the relay after the race's 5s (from 200ms)", ok, el, d.path)
	}
	if !strings.Contains(d.reason, "no answer over UDP for 5.2s, nor over the relay") {
		t.Errorf("reason %q", d.reason)
	}
}

// TestRaceResendsItsInitiation: the race's copy of the initiation over the
// relay goes unanswered (lost with a connection that broke): it is sent
// again, once, ResendAfter later, long before wireguard-go's 5 s retry.
func TestRaceResendsItsInitiation(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	tickUntil(d, c, time.Second, func(a actions) bool { return a.raced })
	raced := c.now
	if got := d.next(c.now); got != raced.Add(DefaultTiming.ResendAfter) {
		t.Errorf("next %v, want the resend at +%s", got.Sub(c.now), DefaultTiming.ResendAfter)
	}
	el, _, ok := tickUntil(d, c, 3*time.Second, func(a actions) bool { return a.resendInit })
	if !ok || el != DefaultTiming.ResendAfter {
		t.Fatalf("resent %v after %s, want after %s", ok, el, DefaultTiming.ResendAfter)
	}
	if _, all, _ := tickUntil(d, c, 3*time.Second, func(actions) bool { return false }); all.resendInit {
		t.Error("resent twice in one race")
	}
	// wireguard-go's own retry, while racing, goes both ways; its copy is
	// sent again in a new race only.
	if udp, relay := d.route(c.now, relaywire.MsgInitiation, 148); !udp || !relay {
		t.Errorf("retry while racing: udp %v relay %v", udp, relay)
	}
}

// TestSilenceRaceProbesWhenItMay: UDP goes mid-download just after a
// handshake, so wireguard-go may not send another for 5 s: the race asks
// for a keepalive at once (it moves the server's endpoint to the relay)
// and for the handshake the moment it may.
func TestSilenceRaceProbesWhenItMay(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(2*time.Millisecond), relaywire.MsgResponse, false)
	d.route(c.add(time.Second), relaywire.MsgData, dataLen) // an acknowledgement, then nothing comes
	el, all, ok := tickUntil(d, c, time.Second, func(a actions) bool { return a.raced })
	if !ok || el != 400*time.Millisecond || !all.keepalive || all.probe {
		t.Fatalf("raced %v after %s asking %+v, want a keepalive and no handshake after 400ms", ok, el, all)
	}
	due := t0.Add(DefaultTiming.ProbeEvery + probeMargin)
	if got := d.next(c.now); !got.Equal(due) {
		t.Errorf("next %v, want the handshake wireguard-go allows at %v", got.Sub(t0), due.Sub(t0))
	}
	if _, _, ok = tickUntil(d, c, 5*time.Second, func(a actions) bool { return a.probe }); !ok || c.now.Before(due) || c.now.Sub(due) > 100*time.Millisecond {
		t.Fatalf("probe %v at %v, want at %v", ok, c.now.Sub(t0), due.Sub(t0))
	}
}

// TestFlowEndSoonAfterAHandshakeAsksThroughTheTunnel: a flow that ends
// less than 5 s after a handshake leaves wireguard-go no handshake to
// send. Where the tunnel can ask its server a question, the silence asks
// that over UDP first; its answer means no race, and no relay connection.
func TestFlowEndSoonAfterAHandshakeAsksThroughTheTunnel(t *testing.T) {
	d, c := newTestDecider(true)
	d.canAsk = true
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(time.Millisecond), relaywire.MsgResponse, false)
	d.route(c.add(time.Second), relaywire.MsgData, dataLen) // the flow's last acknowledgement
	el, all, ok := tickUntil(d, c, time.Second, func(a actions) bool { return a.ask || a.raced })
	if !ok || el != 400*time.Millisecond || !all.ask || all.probe || all.raced || all.keepalive {
		t.Fatalf("after the flow's last packet: %v after %s asking %+v, want a question and no race after 400ms", ok, el, all)
	}
	if udp, relay := d.route(c.add(time.Millisecond), relaywire.MsgData, dataLen); !udp || relay {
		t.Fatalf("the question went udp %v relay %v, want UDP only", udp, relay)
	}
	d.received(c.add(time.Millisecond), relaywire.MsgData, false) // the server's answer
	if _, all, ok := tickUntil(d, c, 10*time.Second, func(a actions) bool { return a.raced || a.switched }); ok || d.racing() || d.path != Direct || d.wantRelay(c.now) {
		t.Fatalf("raced %v (%+v), path %s, relay wanted %v after UDP answered the question", ok, all, d.path, d.wantRelay(c.now))
	}
}

// TestUnansweredQuestionRaces: the question goes unanswered (UDP went
// away just after a handshake): the race starts after the same head start
// as a handshake's, with a keepalive both ways.
func TestUnansweredQuestionRaces(t *testing.T) {
	d, c := newTestDecider(true)
	d.canAsk = true
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(10*time.Millisecond), relaywire.MsgResponse, false) // 40 ms of head start
	d.route(c.add(time.Second), relaywire.MsgData, dataLen)
	if _, _, ok := tickUntil(d, c, time.Second, func(a actions) bool { return a.ask }); !ok {
		t.Fatal("no question asked after the silence")
	}
	asked := c.now
	d.route(c.add(time.Millisecond), relaywire.MsgData, dataLen)
	if got, want := d.next(c.now), asked.Add(40*time.Millisecond); !got.Equal(want) {
		t.Errorf("next %v after the question, want its head start's end %v", got.Sub(asked), want.Sub(asked))
	}
	if a := d.tick(c.add(38 * time.Millisecond)); a.raced || a.ask {
		t.Fatalf("at 39ms: %+v, want nothing before the head start ends", a)
	}
	a := d.tick(c.add(time.Millisecond))
	if !a.raced || !a.keepalive || a.ask || !d.racing() {
		t.Fatalf("at the head start's end: %+v racing %v, want the race with a keepalive", a, d.racing())
	}
}

func TestNoRelayNoFallBack(t *testing.T) {
	d, c := newTestDecider(false)
	d.route(c.now, relaywire.MsgInitiation, 148)
	if _, _, ok := tickUntil(d, c, 30*time.Second, func(a actions) bool { return a.switched || a.raced }); ok || d.path != Direct {
		t.Error("raced with no relay to race")
	}
	if d.wantRelay(c.now) {
		t.Error("wants a relay it does not have")
	}
}

// TestUDPBlockedMidFlow: pings every 20 ms, answered over UDP, then UDP
// goes: after 400 ms of silence every datagram also goes over the relay,
// the server's answer comes back over it and the path switches: well
// within a second of the first unanswered packet.
func TestUDPBlockedMidFlow(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(2*time.Millisecond), relaywire.MsgResponse, false)
	for range 50 {
		d.route(c.add(20*time.Millisecond), relaywire.MsgData, dataLen)
		d.received(c.add(time.Millisecond), relaywire.MsgData, false)
	}
	c.add(30 * time.Second) // the last handshake is old: a probe may be asked
	start := c.now
	var racedAt, switchedAt time.Duration
	probed := false
	for switchedAt == 0 && c.now.Sub(start) < 5*time.Second {
		_, relay := d.route(c.now, relaywire.MsgData, dataLen)
		a := d.tick(c.now)
		probed = probed || a.probe
		if a.raced {
			racedAt = c.now.Sub(start)
		}
		if relay && racedAt > 0 && c.now.Sub(start) >= racedAt+100*time.Millisecond {
			// The relay connected and the server answers over it.
			if d.received(c.now.Add(5*time.Millisecond), relaywire.MsgData, true) {
				switchedAt = c.now.Add(5 * time.Millisecond).Sub(start)
			}
		}
		c.add(20 * time.Millisecond)
	}
	// UDP is asked first: a handshake, whose head start is four of the
	// last handshake's round trips (2 ms here), at least minProbeWait.
	if racedAt != 400*time.Millisecond+minProbeWait || !probed {
		t.Errorf("raced after %s (probe asked %v), want 400ms of silence, a probe and its %s", racedAt, probed, minProbeWait)
	}
	if switchedAt == 0 || switchedAt > time.Second || d.path != Relay {
		t.Fatalf("switched after %s (path %s), want within 1s", switchedAt, d.path)
	}
	if !strings.Contains(d.reason, "nothing over UDP for 5") {
		t.Errorf("reason %q", d.reason)
	}
}

// TestFlowEndAskedOfUDP: a flow's last packet (its final acknowledgement)
// is answered by nothing. The silence asks UDP for a handshake first,
// which UDP answers: no race, and no relay connection wanted.
func TestFlowEndAskedOfUDP(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(time.Millisecond), relaywire.MsgResponse, false) // a 1 ms round trip
	for range 20 {                                                    // the flow: data out, answers in
		d.route(c.add(10*time.Millisecond), relaywire.MsgData, 1400)
		d.received(c.add(time.Millisecond), relaywire.MsgData, false)
	}
	c.add(10 * time.Second)                    // later: wireguard-go may send a handshake
	d.route(c.now, relaywire.MsgData, dataLen) // the last acknowledgement, never answered
	el, all, ok := tickUntil(d, c, time.Second, func(a actions) bool { return a.probe || a.raced })
	if !ok || el != 400*time.Millisecond || !all.probe || all.raced || all.keepalive {
		t.Fatalf("after the flow's last packet: %v after %s asking %+v, want a handshake and no race after 400ms", ok, el, all)
	}
	if udp, relay := d.route(c.add(time.Millisecond), relaywire.MsgInitiation, 148); !udp || relay {
		t.Fatalf("the silence's handshake went udp %v relay %v, want UDP only", udp, relay)
	}
	d.received(c.add(time.Millisecond), relaywire.MsgResponse, false)
	if _, all, ok := tickUntil(d, c, 10*time.Second, func(a actions) bool { return a.raced || a.switched }); ok || d.racing() || d.path != Direct || d.wantRelay(c.now) {
		t.Fatalf("raced %v (%+v), path %s, relay wanted %v after UDP answered the silence's handshake", ok, all, d.path, d.wantRelay(c.now))
	}
}

// TestSilenceProbeUnansweredRaces: the silence's handshake goes out over
// UDP and nothing answers: the race starts after its head start (four of
// the last handshake's round trips, at least minProbeWait) with the
// initiation sent over the relay too.
func TestSilenceProbeUnansweredRaces(t *testing.T) {
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(10*time.Millisecond), relaywire.MsgResponse, false) // a 10 ms round trip: 40 ms of head start
	d.route(c.add(10*time.Second), relaywire.MsgData, dataLen)
	if _, _, ok := tickUntil(d, c, time.Second, func(a actions) bool { return a.probe }); !ok {
		t.Fatal("no handshake asked after the silence")
	}
	asked := c.now
	d.route(c.add(time.Millisecond), relaywire.MsgInitiation, 148)
	if got, want := d.next(c.now), asked.Add(40*time.Millisecond); !got.Equal(want) {
		t.Errorf("next %v after the handshake was asked for, want its head start's end %v", got.Sub(asked), want.Sub(asked))
	}
	c.add(38 * time.Millisecond)
	if a := d.tick(c.now); a.raced {
		t.Fatal("raced before the handshake's head start ended")
	}
	a := d.tick(c.add(time.Millisecond))
	if !a.raced || !a.resendInit || !a.keepalive || !d.racing() {
		t.Fatalf("at the head start's end: %+v racing %v, want the race, with the initiation and a keepalive over the relay", a, d.racing())
	}
}

// TestDeadDestinationEndsTheRace: pings to a host that answers nothing,
// over a UDP that works: the race ends after RaceFor with nothing from
// either path, and the path stays direct.
func TestDeadDestinationEndsTheRace(t *testing.T) {
	d, c := newTestDecider(true)
	d.received(c.now, relaywire.MsgResponse, false)
	d.route(c.add(time.Second), relaywire.MsgData, dataLen)
	tickUntil(d, c, time.Second, func(a actions) bool { return a.raced })
	if !d.racing() {
		t.Fatal("no race after the silence")
	}
	// The silence asked UDP for a handshake first, which wireguard-go did
	// not send here; the race then asks again probeRetry after that, and
	// so on until the race ends.
	if got := d.next(c.now); got != d.lastProbe.Add(probeRetry) {
		t.Errorf("next %v, want the probe's retry %v", got.Sub(c.now), d.lastProbe.Add(probeRetry).Sub(c.now))
	}
	tickUntil(d, c, 10*time.Second, func(actions) bool { return !d.racing() })
	if d.racing() || d.path != Direct || d.wantRelay(c.now) {
		t.Errorf("racing %v path %s relay wanted %v after a race nobody answered", d.racing(), d.path, d.wantRelay(c.now))
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

// relayedByRace takes d to the relay the way a blocked UDP does: the race
// starts after UDP's head start and a datagram of type typ comes back over
// the relay.
func relayedByRace(t *testing.T, d *decider, c *clock, typ byte) {
	t.Helper()
	d.route(c.now, relaywire.MsgInitiation, 148)
	if _, _, ok := tickUntil(d, c, time.Second, func(a actions) bool { return a.raced }); !ok {
		t.Fatal("no race")
	}
	if !d.received(c.add(20*time.Millisecond), typ, true) || d.path != Relay {
		t.Fatalf("not relayed: path %s", d.path)
	}
}

func TestRelayedProbesAndComesBack(t *testing.T) {
	d, c := newTestDecider(true)
	relayedByRace(t, d, c, relaywire.MsgResponse)
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

// TestRelayedFirstHandshakeIsUrgent: relayed with no handshake yet (the
// relay's first answer was data), an initiation needs the relay.
func TestRelayedFirstHandshakeIsUrgent(t *testing.T) {
	d, c := newTestDecider(true)
	relayedByRace(t, d, c, relaywire.MsgCookie)
	if udp, relay := d.route(c.now, relaywire.MsgInitiation, 148); udp || !relay {
		t.Fatalf("first initiation while relayed: udp %v relay %v, want the relay", udp, relay)
	}
}

func TestOnlyAHandshakeOverUDPSwitchesBack(t *testing.T) {
	d, c := newTestDecider(true)
	relayedByRace(t, d, c, relaywire.MsgResponse)
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
	// Direct: after a change, the engine's handshake races the relay at
	// once, no head start.
	d, c := newTestDecider(true)
	d.route(c.now, relaywire.MsgInitiation, 148)
	d.received(c.add(time.Millisecond), relaywire.MsgResponse, false)
	c.add(time.Minute)
	d.networkChanged(c.now)
	if !d.wantRelay(c.now) {
		t.Error("the relay connection is not readied after a network change")
	}
	d.route(c.now, relaywire.MsgInitiation, 148) // the daemon re-handshakes at once
	if a := d.tick(c.now); !a.raced || !a.resendInit {
		t.Errorf("after a network change: tick %+v, want the race at once", a)
	}
	if !d.received(c.add(30*time.Millisecond), relaywire.MsgResponse, true) || d.path != Relay {
		t.Fatalf("the relay answered first but path %s", d.path)
	}
	// Relayed: the engine's new handshake goes over the relay (even one a
	// moment after the last); the UDP probe follows as soon as
	// wireguard-go would send another initiation (5 s).
	c.add(time.Second)
	d.networkChanged(c.now)
	if udp, relay := d.route(c.now, relaywire.MsgInitiation, 148); udp || !relay {
		t.Errorf("relayed, network changed: initiation udp %v relay %v, want the relay", udp, relay)
	}
	d.received(c.add(time.Millisecond), relaywire.MsgResponse, true)
	if el, _, ok := tickUntil(d, c, 10*time.Second, func(a actions) bool { return a.probe }); !ok || el > 5100*time.Millisecond {
		t.Errorf("relayed, network changed: probe after %s, want 5 s after the engine's initiation", el)
	}
	// Direct and answering after the change: nothing switches.
	d2, c2 := newTestDecider(true)
	d2.networkChanged(c2.now)
	d2.route(c2.now, relaywire.MsgInitiation, 148)
	d2.tick(c2.now)
	d2.received(c2.add(20*time.Millisecond), relaywire.MsgResponse, false)
	if _, _, ok := tickUntil(d2, c2, 5*time.Second, func(a actions) bool { return a.switched || a.raced }); ok || d2.path != Direct {
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
	if got := d.next(c.now); !got.Equal(t0.Add(150 * time.Millisecond)) {
		t.Errorf("after an initiation: next %v, want +150ms (the race)", got.Sub(t0))
	}
	if a := d.tick(t0.Add(150 * time.Millisecond)); !a.raced {
		t.Error("no race at the deadline")
	}
	if got := d.next(t0.Add(150 * time.Millisecond)); !got.Equal(t0.Add(1150 * time.Millisecond)) {
		t.Errorf("racing: next %v, want the initiation's resend at +1.15s", got.Sub(t0))
	}
	if a := d.tick(t0.Add(1150 * time.Millisecond)); !a.resendInit {
		t.Error("no resend at the deadline")
	}
	if got := d.next(t0.Add(1150 * time.Millisecond)); !got.Equal(t0.Add(5150 * time.Millisecond)) {
		t.Errorf("racing: next %v, want the race's end at +5.15s", got.Sub(t0))
	}
	d.received(t0.Add(1200*time.Millisecond), relaywire.MsgResponse, true)
	if got := d.next(t0.Add(1200 * time.Millisecond)); !got.Equal(t0.Add(6200 * time.Millisecond)) {
		t.Errorf("relayed: next %v, want the first probe at +6.2s", got.Sub(t0))
	}
	// No relay: nothing to time but nothing.
	d2, c2 := newTestDecider(false)
	d2.route(c2.now, relaywire.MsgInitiation, 148)
	if !d2.next(c2.now).IsZero() {
		t.Error("a decider with no relay has a deadline")
	}
}
