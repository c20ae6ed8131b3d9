package relay

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/runos/vpn/internal/backoff"
	"github.com/runos/vpn/internal/relaywire"
	"github.com/runos/vpn/wghost"
)

const (
	dialTimeout     = 10 * time.Second
	minRedial       = 250 * time.Millisecond
	maxRedial       = 15 * time.Second
	captiveEvery    = 15 * time.Second // at most one captive-portal check per destination this often
	captiveDeadline = 3 * time.Second
)

// dest is one destination: its decider, its relay connection and the
// goroutine that keeps that connection while the decider wants it.
type dest struct {
	b       *Bind
	ep      netip.AddrPort
	epInner conn.Endpoint // how wireguard-go names this peer: relayed datagrams come "from" it
	url     string
	cid     string

	mu          sync.Mutex
	dec         *decider
	lastInit    []byte // the last initiation sent, to re-send over the relay
	initiated   bool   // an initiation went out and no data since (route)
	pendingInit []byte // to send once the relay connection is up
	stream      *wghost.Stream
	relayErr    string
	captive     string
	lastCaptive time.Time

	// The relay ticket last asked for, kept by keepRelay's goroutine (the
	// only one that dials) for the next dial until ticketMargin before it
	// expires.
	ticket        string
	ticketExpires time.Time

	wanted    chan struct{} // the decider wants the connection (from the Bind's ticks)
	redialNow chan struct{} // the network changed: dial again at once, whatever the backoff
	ctx       context.Context
	cancel    context.CancelFunc
	startOnce sync.Once
	done      chan struct{}
}

func newDest(b *Bind, d Dest, now time.Time) *dest {
	ctx, cancel := context.WithCancel(b.ctx)
	inner, err := b.cfg.Inner.ParseEndpoint(d.Endpoint.String())
	if err != nil {
		inner = &conn.StdNetEndpoint{AddrPort: d.Endpoint}
	}
	dec := newDecider(b.cfg.Timing, d.RelayURL != "", now)
	dec.canAsk = d.Askable
	return &dest{b: b, ep: d.Endpoint, epInner: inner, url: d.RelayURL, cid: d.CID,
		dec: dec, wanted: make(chan struct{}, 1), redialNow: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

func (d *dest) start() {
	d.startOnce.Do(func() {
		if d.url == "" {
			close(d.done)
			return
		}
		go d.keepRelay()
	})
}

// shut closes the relay connection for good (the destination is gone).
func (d *dest) shut() {
	d.cancel()
	d.mu.Lock()
	s := d.stream
	d.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}

// redial closes the relay connection so that it is made again at once
// (the network changed, or the server restarted) if it is still wanted.
func (d *dest) redial() {
	d.mu.Lock()
	s := d.stream
	d.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
	select {
	case d.redialNow <- struct{}{}:
	default:
	}
}

// serverRestarted decides the path again for the restarted server (see
// Bind.ServerRestarted) and reports whether that switched it. The
// initiations kept to resend were the old server's: the new one is not
// waiting for them, and its answer to one (were it sent over the relay
// once connected) would win a race for a handshake the peer no longer
// has. The relay connection is made again at once (redial).
func (d *dest) serverRestarted(now time.Time) bool {
	d.mu.Lock()
	from := d.dec.path
	switched := d.dec.serverRestarted(now)
	d.lastInit, d.pendingInit = nil, nil
	if switched {
		d.captive = ""
	}
	to, why := d.dec.path, d.dec.reason
	d.mu.Unlock()
	if switched {
		d.logSwitch(from, to, why)
	}
	if d.url != "" {
		d.redial()
	}
	return switched
}

func (d *dest) route(now time.Time, bufs [][]byte) (udp, relay bool) {
	typ := relaywire.MessageType(bufs[0])
	d.mu.Lock()
	noWait, noSilence := d.dec.udpWaitSince.IsZero(), d.dec.silenceSince.IsZero()
	udp, relay = d.dec.route(now, typ, len(bufs[0]))
	if typ == relaywire.MsgInitiation {
		d.lastInit = append(d.lastInit[:0], bufs[0]...)
	}
	// wireguard-go records a handshake it initiated (its peer's last
	// handshake) before it sends the keepalive that confirms the session:
	// the first data after an initiation says a read of the device now
	// shows the handshake. (During a rekey, data on the old session comes
	// first: one read too early, no harm.)
	completed := typ == relaywire.MsgData && d.initiated
	d.initiated = typ == relaywire.MsgInitiation || d.initiated && !completed
	// A wait began: the Bind's loop times it (at once when the path is in
	// doubt, else when the decider next needs a tick; never without a
	// relay to race, when a tick has nothing to do).
	var due time.Time
	if noWait && !d.dec.udpWaitSince.IsZero() || noSilence && !d.dec.silenceSince.IsZero() {
		if due = d.dec.next(now); d.dec.suspect {
			due = now
		}
	}
	d.mu.Unlock()
	if !due.IsZero() {
		d.b.wakeFor(due)
	}
	if completed {
		d.b.cfg.OnHandshake()
	}
	return udp, relay
}

func (d *dest) received(now time.Time, typ byte, viaRelay bool) {
	d.mu.Lock()
	from := d.dec.path
	switched := d.dec.received(now, typ, viaRelay)
	if switched {
		d.captive = ""
	}
	to, why := d.dec.path, d.dec.reason
	d.mu.Unlock()
	if switched {
		d.logSwitch(from, to, why)
		d.b.cfg.OnChange()
	}
}

// tick moves the decider on and opens or closes the relay connection as
// it wants; it returns when the destination next needs a tick (zero:
// until something happens).
func (d *dest) tick(now time.Time) (actions, time.Time) {
	d.mu.Lock()
	from := d.dec.path
	a := d.dec.tick(now)
	next := d.dec.next(now)
	want := d.dec.wantRelay(now)
	s := d.stream
	if a.resendInit && len(d.lastInit) > 0 {
		d.pendingInit = slices.Clone(d.lastInit)
	}
	var resend []byte
	if s != nil && d.pendingInit != nil {
		resend, d.pendingInit = d.pendingInit, nil
	}
	to, why := d.dec.path, d.dec.reason
	var race string
	if a.raced {
		race = d.dec.raceReason(now)
	}
	d.mu.Unlock()
	if a.switched {
		d.logSwitch(from, to, why)
	}
	if a.raced {
		d.b.log.Info("trying the relay beside UDP", "cid", d.cid, "reason", race, "endpoint", d.ep.String(), "relay", d.url)
	}
	if resend != nil {
		_ = d.write([][]byte{resend})
	}
	switch {
	case want && s == nil:
		select {
		case d.wanted <- struct{}{}:
		default:
		}
	case !want && s != nil:
		d.b.log.Debug("relay connection unused: closing it", "cid", d.cid, "relay", d.url)
		_ = s.Close()
	}
	return a, next
}

func (d *dest) logSwitch(from, to Path, why string) {
	d.b.log.Info("cluster path changed", "cid", d.cid, "from", string(from), "to", string(to), "reason", why,
		"endpoint", d.ep.String(), "relay", d.url)
}

func (d *dest) state() State {
	d.mu.Lock()
	defer d.mu.Unlock()
	return State{CID: d.cid, Endpoint: d.ep, Path: d.dec.path, Since: d.dec.since, Reason: d.dec.reason,
		RelayURL: d.url, RelayUp: d.stream != nil, RelayErr: d.relayErr, Captive: d.captive}
}

// sendRelay sends datagrams over the relay; while it is not connected they
// are dropped, as a lossy path would (the connection is being made).
func (d *dest) sendRelay(bufs [][]byte) error {
	d.mu.Lock()
	connected := d.stream != nil
	if !connected && relaywire.MessageType(bufs[0]) == relaywire.MsgInitiation {
		d.pendingInit = slices.Clone(bufs[0])
	}
	d.mu.Unlock()
	if !connected {
		return nil
	}
	return d.write(bufs)
}

func (d *dest) write(bufs [][]byte) error {
	d.mu.Lock()
	s := d.stream
	d.mu.Unlock()
	if s == nil {
		return nil
	}
	if _, err := s.Send(bufs); err != nil {
		return fmt.Errorf("relay %s: %w", d.url, err) // Send closed it: the reader drops the connection
	}
	return nil
}

// keepRelay makes the relay connection whenever the decider wants it and
// reads from it until it breaks; it ends when the destination goes.
func (d *dest) keepRelay() {
	defer close(d.done)
	wait := backoff.New(minRedial, maxRedial)
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-d.wanted:
		case <-d.redialNow:
		}
		d.mu.Lock()
		want := d.dec.wantRelay(d.b.cfg.Now())
		d.mu.Unlock()
		if !want {
			continue
		}
		ctx, cancel := context.WithTimeout(d.ctx, dialTimeout)
		s, err := d.dial(ctx)
		cancel()
		if err != nil {
			if d.ctx.Err() != nil {
				return
			}
			d.failed(err)
			select {
			case <-d.ctx.Done():
				return
			case <-time.After(wait.Next()):
			case <-d.redialNow: // the network changed: try at once
			}
			select { // then at the next tick that still wants it
			case <-d.wanted:
			default:
			}
			continue
		}
		wait.Reset()
		ws := wghost.NewStream(s)
		d.connected(ws)
		err = d.read(ws)
		d.disconnected(ws, err)
		select { // still wanted? the next round decides
		case d.wanted <- struct{}{}:
		default:
		}
	}
}

func (d *dest) connected(s *wghost.Stream) {
	d.mu.Lock()
	if d.ctx.Err() != nil {
		d.mu.Unlock()
		_ = s.Close()
		return
	}
	d.stream, d.relayErr, d.captive = s, "", ""
	resend := d.pendingInit
	d.pendingInit = nil
	racing := d.dec.racing()
	d.mu.Unlock()
	d.b.log.Info("relay connected", "cid", d.cid, "relay", d.url)
	if resend != nil {
		_ = d.write([][]byte{resend})
	}
	if racing {
		// The race's keepalive went nowhere over the relay while the
		// connection was being made: one now moves the server's
		// endpoint here, whatever handshake wireguard-go may not send
		// yet (see decider.tick).
		d.b.cfg.Keepalive(d.ep)
	}
	d.b.cfg.OnChange()
	d.b.wake()
}

func (d *dest) disconnected(s *wghost.Stream, err error) {
	_ = s.Close()
	d.mu.Lock()
	d.stream = nil
	relayed := d.dec.path == Relay
	if relayed && d.ctx.Err() == nil {
		d.relayErr = "the relay connection broke: " + err.Error()
	}
	d.mu.Unlock()
	lvl := d.b.log.Debug
	if relayed && d.ctx.Err() == nil {
		lvl = d.b.log.Warn
	}
	lvl("relay disconnected", "cid", d.cid, "relay", d.url, "err", err)
	d.b.cfg.OnChange()
}

// failed records a failed dial and, when UDP does not answer either, looks
// for a captive portal.
func (d *dest) failed(err error) {
	now := d.b.cfg.Now()
	d.mu.Lock()
	same := d.relayErr == err.Error()
	d.relayErr = err.Error()
	check := (d.dec.path == Relay || d.dec.racing()) && now.Sub(d.lastCaptive) >= captiveEvery
	if check {
		d.lastCaptive = now
	}
	d.mu.Unlock()
	lvl := d.b.log.Warn
	if same {
		lvl = d.b.log.Debug // said already; retrying with backoff
	}
	lvl("relay unreachable", "cid", d.cid, "relay", d.url, "err", err)
	if check {
		ctx, cancel := context.WithTimeout(d.ctx, captiveDeadline)
		portal, found := d.b.cfg.Captive(ctx, d.url)
		cancel()
		d.mu.Lock()
		was := d.captive
		d.captive = ""
		if found {
			if portal == "" {
				portal = "the network's sign-in page" // 511: the portal did not say where
			}
			d.captive = portal
		}
		d.mu.Unlock()
		if found && was != portal {
			d.b.log.Warn("the network needs a sign-in page first: plain HTTP is redirected", "cid", d.cid, "portal", portal)
		}
	}
	d.b.cfg.OnChange()
}

// read hands the relay's datagrams to wireguard-go until the connection
// breaks.
func (d *dest) read(s *wghost.Stream) error {
	err := s.Receive(d.b.Bind, d.epInner, d.ctx.Done(), func(p []byte) {
		d.received(d.b.cfg.Now(), relaywire.MessageType(p), true)
	})
	if d.ctx.Err() != nil || errors.Is(err, wghost.ErrDone) {
		return errors.New("closed")
	}
	return err
}

// ticketMargin is how long before its expiry a kept ticket is asked for
// again: a dial's own time, and clocks that disagree a little.
const ticketMargin = 30 * time.Second

// dial opens the stream with a relay ticket: the one kept from the last
// dial while it has more than ticketMargin left, else a new one from
// control. Races of the paths can dial every few seconds (each silence UDP
// does not answer at once), and each ticket was a request to control; a
// ticket may be shown until it expires. One a dial failed with is not
// shown again (a relay that refused it, a node that no longer serves the
// cluster: the next dial asks afresh).
func (d *dest) dial(ctx context.Context) (Stream, error) {
	if d.ticket == "" || !d.b.cfg.Now().Add(ticketMargin).Before(d.ticketExpires) {
		ticket, expires, err := d.b.cfg.Ticket(ctx, d.cid)
		if err != nil {
			return nil, fmt.Errorf("relay ticket for %s: %w", d.cid, err)
		}
		d.ticket, d.ticketExpires = ticket, expires
	}
	s, err := d.b.cfg.Dial(ctx, Dest{CID: d.cid, Endpoint: d.ep, RelayURL: d.url}, d.ticket)
	if err != nil {
		d.ticket, d.ticketExpires = "", time.Time{}
	}
	return s, err
}
