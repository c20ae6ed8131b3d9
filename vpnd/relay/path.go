package relay

import (
	"fmt"
	"time"

	"github.com/runos/vpn/internal/relaywire"
)

// Path is how a cluster's WireGuard datagrams travel.
type Path string

// Paths.
const (
	Direct Path = "direct" // UDP to the node's VPN port
	Relay  Path = "relay"  // framed over the node's HTTPS relay
)

// Timing is when the decision moves. The decider races the two paths
// (happy eyeballs, RFC 8305) rather than waiting for one to fail: UDP gets
// a head start, then the relay is tried beside it, and whichever the
// server answers over first carries the peer. It needs no handshake of its
// own to find out: a WireGuard server answers only the first copy of an
// initiation (the second is a replay) and sends its data back the way the
// last packet it accepted came, so the answer arrives over the path that
// delivered first. The defaults fit what wireguard-go itself does: it
// refuses to start a new handshake sooner than 5 s after the last (so a
// probe can never be more frequent), rekeys every 2 minutes and drops keys
// after 3.
type Timing struct {
	// RaceAfter: an initiation unanswered over UDP this long (UDP's head
	// start) starts the race: the relay connection is made and the
	// initiation goes over it too. A handshake over UDP takes one round
	// trip, a few milliseconds, so a UDP that works never waits that long
	// and never pays for the relay.
	RaceAfter time.Duration
	// SilenceAfter: on the direct path, packets (not keepalives) sent and
	// nothing back over UDP this long asks UDP first, with a handshake
	// when wireguard-go may send one (a working UDP answers it in a round
	// trip), else with a question through the tunnel where the
	// destination is Askable, then starts the race, with every datagram sent both ways
	// until one path answers. Asking first matters because the last
	// packet of every flow that ends (its final acknowledgement) is
	// answered by nothing: a race there would make a relay connection
	// per idle flow. The handshake's head start is four round trips of the
	// last UDP handshake, at least minProbeWait and at most RaceAfter.
	SilenceAfter time.Duration
	// RaceFor: a race in which neither path answered ends after this: on
	// the relay when a handshake went unanswered (UDP surely does not get
	// through), else where it was (data to a host that is down; the next
	// silence starts another race).
	RaceFor time.Duration
	// ResendAfter: a race's initiation unanswered this long is sent over
	// the relay once more. A copy lost on its way (dropped while the
	// connection was being made, or with a connection that broke) then
	// costs this, not wireguard-go's 5 s retry; a copy the server had
	// taken is a replay to it and changes nothing.
	ResendAfter time.Duration
	// ProbeEvery: while relayed, test UDP with a handshake this often.
	ProbeEvery time.Duration
	// UrgentAfter: while relayed, an initiation goes over UDP only (a
	// probe) while the last handshake is younger than this; an older one
	// needs the relay, so the keys never run out.
	UrgentAfter time.Duration
	// WarmFor: a relay connection unused this long is closed.
	WarmFor time.Duration
}

// DefaultTiming is the production timing.
var DefaultTiming = Timing{
	RaceAfter:    150 * time.Millisecond,
	SilenceAfter: 400 * time.Millisecond,
	RaceFor:      5 * time.Second,
	ResendAfter:  time.Second,
	ProbeEvery:   5 * time.Second,
	UrgentAfter:  60 * time.Second,
	WarmFor:      60 * time.Second,
}

// keepaliveLen is the size of a WireGuard keepalive (a transport message
// with nothing in it: 16-byte header, 16-byte tag). Keepalives are never
// answered, so they say nothing about the path.
const keepaliveLen = 32

// decider decides one destination's path from what was sent and received
// and when. It does no I/O and reads no clock: its methods take the time,
// and tick's answer says what to do (the Bind does it).
type decider struct {
	t        Timing
	hasRelay bool // the destination has a relay URL: without one, UDP is all there is
	canAsk   bool // a question through the tunnel may stand for a handshake (Dest.Askable; set at creation, never changed)

	path   Path
	since  time.Time
	reason string

	udpWaitSince  time.Time // first initiation over UDP since the last UDP receive
	silenceSince  time.Time // direct: first packet sent since the last UDP receive
	raceSince     time.Time // direct: the relay is tried beside UDP since then
	raceFrom      time.Time // what the race waits on began then (an initiation or a packet sent)
	resent        bool      // this race's initiation was sent over the relay again
	suspect       bool      // a network change: race at the first initiation, no head start
	lastHandshake time.Time // last handshake response received, either way
	lastProbe     time.Time // last handshake asked of wireguard-go
	lastInit      time.Time // last initiation sent, either way: wireguard-go sends the next no sooner than ProbeEvery after it
	lastRelayUse  time.Time
	lastSent      time.Time     // direct: last packet sent (not a keepalive or an initiation)
	silenceProbe  time.Time     // direct: a silence's handshake (or question) asked of UDP then (this silence's when not before silenceSince)
	udpRTT        time.Duration // the last handshake's round trip over UDP (0: none seen)
}

// minProbeWait is the least head start a silence's handshake over UDP gets
// before the race (SilenceAfter): a handshake takes the server a few
// hundred microseconds, and the daemon's own loop a tick.
const minProbeWait = 20 * time.Millisecond

// probeWait is how long a silence's handshake has to be answered over UDP
// before the relay is raced.
func (d *decider) probeWait() time.Duration {
	if d.udpRTT == 0 {
		return d.t.RaceAfter
	}
	return min(max(4*d.udpRTT, minProbeWait), d.t.RaceAfter)
}

// silenceProbed reports whether the current silence has asked UDP first.
func (d *decider) silenceProbed() bool {
	return !d.silenceSince.IsZero() && !d.silenceProbe.Before(d.silenceSince)
}

func newDecider(t Timing, hasRelay bool, now time.Time) *decider {
	return &decider{t: t, hasRelay: hasRelay, path: Direct, since: now, reason: "UDP first"}
}

// racing reports whether the relay is being tried beside UDP.
func (d *decider) racing() bool { return !d.raceSince.IsZero() }

// route says where datagrams of type typ (relaywire.Msg…) and length n
// go, and notes that they went.
func (d *decider) route(now time.Time, typ byte, n int) (udp, relay bool) {
	if typ == relaywire.MsgInitiation {
		d.lastInit = now
	}
	if d.path == Direct {
		switch {
		case typ == relaywire.MsgInitiation:
			if d.udpWaitSince.IsZero() {
				d.udpWaitSince = now
			}
		case typ == relaywire.MsgData && n == keepaliveLen:
		default:
			d.lastSent = now
			if d.silenceSince.IsZero() {
				d.silenceSince = now
			}
		}
		return true, d.racing()
	}
	if typ == relaywire.MsgInitiation && !d.urgent(now) {
		return true, false // a probe: does UDP answer again?
	}
	d.lastRelayUse = now
	return false, true
}

func (d *decider) urgent(now time.Time) bool {
	return d.lastHandshake.IsZero() || now.Sub(d.lastHandshake) >= d.t.UrgentAfter
}

// received notes a datagram of type typ from the destination; it returns
// true when that switched the path.
func (d *decider) received(now time.Time, typ byte, viaRelay bool) bool {
	if typ == relaywire.MsgResponse {
		d.lastHandshake = now
		if !viaRelay && !d.lastInit.IsZero() && now.Sub(d.lastInit) < d.t.ProbeEvery {
			d.udpRTT = now.Sub(d.lastInit)
		}
	}
	if viaRelay {
		if d.path == Direct && d.racing() {
			d.switchTo(now, Relay, fmt.Sprintf("the relay answered first: nothing over UDP for %s", round(now.Sub(d.raceFrom))))
			return true
		}
		if d.path == Relay {
			d.lastRelayUse = now
		}
		return false
	}
	d.udpWaitSince, d.silenceSince, d.suspect = time.Time{}, time.Time{}, false
	d.raceSince, d.raceFrom = time.Time{}, time.Time{}
	if d.path == Relay && typ == relaywire.MsgResponse {
		d.switchTo(now, Direct, "a handshake over UDP succeeded")
		return true
	}
	return false
}

// actions is what a tick asks the Bind to do.
type actions struct {
	switched   bool // the path changed (log it, tell the daemon)
	probe      bool // ask wireguard-go for a handshake now
	keepalive  bool // ask wireguard-go for a keepalive now (it goes both ways: a race began)
	ask        bool // send a question through the tunnel that the server answers (Config.Ask)
	resendInit bool // send the last initiation over the relay (it went to UDP unanswered)
	raced      bool // a race began (log it)
}

// tick moves the decision on with time.
func (d *decider) tick(now time.Time) actions {
	var a actions
	if d.path == Relay {
		if d.probeDue(now) {
			d.lastProbe, a.probe = now, true
		}
		return a
	}
	if !d.hasRelay {
		return a
	}
	if d.racing() {
		switch {
		case now.Sub(d.raceSince) < d.t.RaceFor:
			d.pressRace(now, &a)
		case !d.udpWaitSince.IsZero():
			// No handshake either way: UDP surely does not get through,
			// and the relay is what is left (its error, if it has one,
			// is the status's to show).
			d.switchTo(now, Relay, fmt.Sprintf("a handshake initiation got no answer over UDP for %s, nor over the relay yet", round(now.Sub(d.udpWaitSince))))
			a.switched = true
		default:
			// Data unanswered both ways: what is silent is the
			// destination (a host that is down), not the path.
			d.raceSince, d.raceFrom, d.silenceSince = time.Time{}, time.Time{}, time.Time{}
		}
		return a
	}
	wait := now.Sub(d.udpWaitSince)
	switch {
	case !d.udpWaitSince.IsZero() && (wait >= d.t.RaceAfter || d.suspect):
		d.startRace(now, d.udpWaitSince)
		a.raced, a.resendInit = true, true
	case !d.silenceSince.IsZero() && now.Sub(d.silenceSince) >= d.t.SilenceAfter:
		if !d.silenceProbed() && d.probeDue(now) {
			// UDP first (see SilenceAfter): the race waits probeWait
			// from the asking for the handshake's answer.
			d.silenceProbe, d.lastProbe, a.probe = now, now, true
			return a
		}
		if !d.silenceProbed() && d.canAsk {
			// No handshake may be asked (wireguard-go sent one less
			// than 5 s ago: a flow that ended soon after it began), so
			// UDP is asked a question through the tunnel, which its
			// server answers at once; the same head start.
			d.silenceProbe, a.ask = now, true
			return a
		}
		if d.silenceProbed() && now.Sub(d.silenceProbe) < d.probeWait() {
			return a
		}
		// The silence's handshake, if wireguard-go sent it, went over UDP
		// unanswered: it goes over the relay too.
		a.resendInit = !d.udpWaitSince.IsZero()
		d.startRace(now, d.silenceSince)
		// A keepalive goes both ways at once: one that arrives over the
		// relay moves the server's endpoint there, so what it sends
		// comes back over the relay and wins the race. That matters
		// where the laptop receives and sends nothing more (a download:
		// it acknowledges only what arrives), and needs no handshake,
		// which wireguard-go may refuse for 5 s after its last.
		a.raced, a.keepalive = true, true
		// A handshake, when wireguard-go would send one, is answered by
		// a working UDP even when the data is one-way.
		if d.probeDue(now) {
			d.lastProbe, a.probe = now, true
		}
	}
	return a
}

// pressRace is what a race that goes on asks: the handshake a silence
// race could not have at its start (wireguard-go had sent one less than
// 5 s before) once it may, and the race's initiation over the relay again
// once it went unanswered for ResendAfter.
func (d *decider) pressRace(now time.Time, a *actions) {
	if d.udpWaitSince.IsZero() {
		if d.probeDue(now) {
			d.lastProbe, a.probe = now, true
		}
		return
	}
	if !d.resent && !now.Before(d.resendAt()) {
		d.resent, a.resendInit = true, true
	}
}

// resendAt is when a race's unanswered initiation goes over the relay
// again: ResendAfter after it went there first (the race's start, or the
// initiation itself when it was sent while racing).
func (d *decider) resendAt() time.Time {
	from := d.raceSince
	if d.udpWaitSince.After(from) {
		from = d.udpWaitSince
	}
	return from.Add(d.t.ResendAfter)
}

func (d *decider) startRace(now, from time.Time) {
	d.raceSince, d.raceFrom, d.resent = now, from, false
}

// raceReason words why the race began, for the log.
func (d *decider) raceReason(now time.Time) string {
	if !d.udpWaitSince.IsZero() && !d.udpWaitSince.After(d.raceFrom) {
		return fmt.Sprintf("a handshake initiation got no answer over UDP for %s", now.Sub(d.raceFrom).Round(time.Millisecond))
	}
	return fmt.Sprintf("nothing came back over UDP for %s", now.Sub(d.raceFrom).Round(time.Millisecond))
}

// Probes are asked for ProbeEvery after the last initiation (wireguard-go
// would send none sooner: REKEY_TIMEOUT) and, when one was asked for and
// not sent, again after probeRetry.
const probeRetry = 250 * time.Millisecond

// probeDue reports whether a probe may be asked for now.
func (d *decider) probeDue(now time.Time) bool {
	return !now.Before(d.probeAt())
}

// probeAt is when the next probe is due.
func (d *decider) probeAt() time.Time {
	t := d.lastInit.Add(d.t.ProbeEvery + probeMargin)
	if r := d.lastProbe.Add(probeRetry); r.After(t) {
		t = r
	}
	if !d.lastProbe.IsZero() && d.path == Relay {
		// While relayed, probes are spaced ProbeEvery whatever sent the
		// last initiation.
		if p := d.lastProbe.Add(d.t.ProbeEvery); p.After(t) {
			t = p
		}
	}
	return t
}

// probeMargin: wireguard-go's own clock read a moment before ours.
const probeMargin = 10 * time.Millisecond

func (d *decider) switchTo(now time.Time, p Path, why string) {
	d.path, d.since, d.reason = p, now, why
	d.udpWaitSince, d.silenceSince, d.suspect = time.Time{}, time.Time{}, false
	d.raceSince, d.raceFrom = time.Time{}, time.Time{}
	if p == Relay {
		d.lastRelayUse = now
		d.lastProbe = now // the first probe after ProbeEvery, not at once
	}
}

// networkChanged: the laptop's addresses or default route changed (or it
// woke), and the engine re-handshakes every peer with fresh keys. What held
// on the old network proves nothing: on the direct path that handshake
// races the relay at once; on the relay it goes over the relay (its
// connection made again), and UDP is probed at once after.
func (d *decider) networkChanged(now time.Time) {
	d.suspect = true
	d.lastProbe = time.Time{}
	d.udpWaitSince, d.silenceSince = time.Time{}, time.Time{}
	d.raceSince, d.raceFrom = time.Time{}, time.Time{}
	if d.path == Relay {
		d.lastHandshake = time.Time{} // the next initiation is urgent: over the relay
	}
}

// serverRestarted: the VPN server started again (a new epoch) and has
// forgotten this device's session; the daemon re-creates the peer, which
// sends an initiation at once. What the decision rests on was learnt of
// the server before: a relay taken while it was down (UDP got no answer
// because nothing listened), a handshake the new one does not know. So
// its first handshake decides again as a new connect's does: UDP first,
// the relay raced beside it after UDP's head start (tick). Relayed, that
// is a switch to the direct path (it returns true); on the direct path a
// wait or race begun with the old server ends, and a network change's
// doubt stays. lastRelayUse stays too: a relay in use is kept ready for
// the race.
func (d *decider) serverRestarted(now time.Time) bool {
	d.lastHandshake = time.Time{} // none with this server yet: relayed again, its initiations are urgent
	if d.path == Direct {
		d.udpWaitSince, d.silenceSince = time.Time{}, time.Time{}
		d.raceSince, d.raceFrom = time.Time{}, time.Time{}
		return false
	}
	d.switchTo(now, Direct, "the VPN server restarted: UDP first again, as at a connect")
	return true
}

// wantRelay reports whether the relay connection should be open: while
// relayed, while racing, while the direct path is in doubt (so a race
// finds it ready), and for WarmFor after its last use.
func (d *decider) wantRelay(now time.Time) bool {
	if !d.hasRelay {
		return false
	}
	return d.path == Relay || d.racing() || d.suspect ||
		!d.lastRelayUse.IsZero() && now.Sub(d.lastRelayUse) < d.t.WarmFor
}

// next is the first instant after now at which time alone changes what
// tick or wantRelay answer (zero: none until something is sent or
// received), so the Bind wakes exactly then rather than polling.
func (d *decider) next(now time.Time) time.Time {
	var next time.Time
	at := func(t time.Time) {
		if !t.IsZero() && t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !d.lastRelayUse.IsZero() {
		at(d.lastRelayUse.Add(d.t.WarmFor))
	}
	if !d.hasRelay {
		return next
	}
	if d.path == Relay {
		at(d.probeAt())
		return next
	}
	if d.racing() {
		at(d.raceSince.Add(d.t.RaceFor))
		switch {
		case d.udpWaitSince.IsZero():
			at(d.probeAt())
		case !d.resent:
			at(d.resendAt())
		}
		return next
	}
	if w := d.udpWaitSince; !w.IsZero() {
		at(w.Add(d.t.RaceAfter))
	}
	if s := d.silenceSince; !s.IsZero() {
		at(s.Add(d.t.SilenceAfter))
		if d.silenceProbed() {
			at(d.silenceProbe.Add(d.probeWait()))
		}
	}
	if !d.lastSent.IsZero() && now.Sub(d.lastSent) < d.t.SilenceAfter {
		// Packets are flowing: keep a tick no later than a silence that
		// begins from now would be due, so that no packet needs to wake
		// the Bind's loop to time the silence it begins (a bulk transfer
		// begins one per batch sent after an answer): at most one tick
		// per SilenceAfter while traffic lasts, none once it stops.
		at(now.Add(d.t.SilenceAfter))
	}
	return next
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
