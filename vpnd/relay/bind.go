// Package relay is the daemon's policy of the WireGuard host's Bind
// (wghost.Bind): it sends each cluster's WireGuard datagrams over UDP, as
// wireguard-go's own Bind does, and, when UDP is slow to answer, over the
// relay of the node serving that cluster too (WireGuard over HTTPS, see
// internal/relaywire and gateway/relay): the two paths race, and the one
// the server answers over first carries the peer. It keeps testing UDP
// while relayed and goes back to it when a handshake over UDP succeeds. The
// decision is per cluster (per destination), so one cluster can be relayed
// while another is direct; it is made by a pure decider (path.go) from
// what was sent and received and when.
//
// The relay carries the same ciphertext UDP would: keys, handshakes and
// `wg show` are wireguard-go's as before. The Bind is not a general proxy
// and keeps no state a restart would need.
package relay

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/internal/relaywire"
	"github.com/runos/vpn/wghost"
)

// Dest is one cluster's VPN server as the Bind serves it.
type Dest struct {
	CID      string
	Endpoint netip.AddrPort // UDP, as configured on the peer
	RelayURL string         // "" when control gives none: UDP only
	// Askable: the tunnel can ask this server a question it answers at
	// once (Config.Ask). A silence that may not ask wireguard-go for a
	// handshake (one went less than 5 s before) asks that instead of
	// racing the relay at once.
	Askable bool
}

// Config is what the Bind needs; the side effects are injected.
type Config struct {
	Inner conn.Bind // conn.NewDefaultBind() in production
	Log   *slog.Logger
	Key   wgtypes.Key // the device's public key, shown to the relay
	// Ticket asks control for the relay ticket of cid's VPN node, which
	// the relay checks with control, and when control stops honouring it
	// (zero: not said). The session's token never goes to a relay (nor
	// through the node's ingress). A destination shows its ticket again
	// until shortly before it expires (see dest.dial).
	Ticket func(ctx context.Context, cid string) (ticket string, expires time.Time, err error)
	// TLS returns the configuration that verifies the relays'
	// certificates; called at the first dial (the system's roots cost
	// memory a laptop that never needs the relay should not pay).
	TLS func() (*tls.Config, error)
	// Rehandshake asks wireguard-go for a handshake with the peer at this
	// endpoint now (a probe: wireguard-go sends at most one every 5 s).
	Rehandshake func(netip.AddrPort)
	// Keepalive asks wireguard-go for a keepalive to the peer at this
	// endpoint now (a race began on a silence: see decider.tick).
	Keepalive func(netip.AddrPort)
	// Ask sends, through the tunnel, a question the server at this
	// endpoint answers at once (the daemon's liveness probe: a DNS query
	// to the cluster's DNS on the server's address), for a destination
	// that is Askable: its answer over UDP says UDP still works without
	// a handshake.
	Ask func(netip.AddrPort)
	// OnChange is called (not under any lock of the Bind) when a path,
	// a relay connection or a captive portal's finding changed.
	OnChange func()
	// OnHandshake is called (not under any lock of the Bind) when a
	// handshake this end initiated has completed: the first data message
	// to the destination after an initiation is being sent. A read of
	// the device then shows it, without waiting for the next poll.
	OnHandshake func()
	Timing      Timing
	Now         func() time.Time
	// Dial opens a relay stream to to.RelayURL, showing ticket; nil: a
	// WebSocket over HTTPS to the VPN node's address only (conn.go).
	Dial func(ctx context.Context, to Dest, ticket string) (Stream, error)
	// Captive checks for a captive portal in front of the relay's host;
	// nil: plain HTTP to it (captive.go).
	Captive func(ctx context.Context, relayURL string) (portal string, found bool)
}

// Stream is an open relay connection: framed datagrams both ways.
type Stream interface {
	Read(p []byte) (int, error)
	Write(p []byte) (int, error)
	Close() error
}

// Bind is the daemon's wghost.Bind: its policy (Route, ObserveUDP) sends
// each destination's datagrams the way its decider chose, and tells the
// decider what came back over UDP.
type Bind struct {
	*wghost.Bind
	cfg  Config
	log  *slog.Logger
	kick chan struct{}
	// armed is when the loop's timer fires (cfg.Now's unix ns), 0 while
	// the loop is ticking or not yet started: a wait that begins with a
	// packet kicks the loop only when it is due before that (wakeFor).
	armed atomic.Int64
	loops atomic.Uint64 // the loop's runs, for tests

	dests atomic.Pointer[map[netip.AddrPort]*dest] // read on every packet; replaced whole by SetDests

	mu   sync.Mutex // one SetDests at a time
	ctx  context.Context
	stop context.CancelFunc
	loop sync.WaitGroup
}

var (
	_ conn.Bind          = (*Bind)(nil)
	_ wghost.UDPObserver = (*Bind)(nil)
)

// New returns a Bind with no destinations; Stop ends its goroutines.
func New(cfg Config) *Bind {
	if cfg.Timing == (Timing{}) {
		cfg.Timing = DefaultTiming
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	if cfg.OnHandshake == nil {
		cfg.OnHandshake = func() {}
	}
	if cfg.Rehandshake == nil {
		cfg.Rehandshake = func(netip.AddrPort) {}
	}
	if cfg.Ask == nil {
		cfg.Ask = func(netip.AddrPort) {}
	}
	if cfg.Keepalive == nil {
		cfg.Keepalive = func(netip.AddrPort) {}
	}
	if cfg.Ticket == nil {
		cfg.Ticket = func(context.Context, string) (string, time.Time, error) {
			return "", time.Time{}, errors.New("no session to ask control for a relay ticket")
		}
	}
	b := &Bind{cfg: cfg, log: cfg.Log, kick: make(chan struct{}, 1)}
	b.Bind = wghost.NewBind(cfg.Inner, b)
	if b.cfg.Dial == nil {
		b.cfg.Dial = b.dialWebSocket
	}
	if b.cfg.Captive == nil {
		b.cfg.Captive = checkCaptive
	}
	empty := map[netip.AddrPort]*dest{}
	b.dests.Store(&empty)
	b.ctx, b.stop = context.WithCancel(context.Background())
	b.loop.Add(1)
	go b.run()
	return b
}

// Stop closes every relay connection and ends the Bind's goroutines (the
// daemon stops).
func (b *Bind) Stop() {
	b.SetDests(nil)
	b.stop()
	b.loop.Wait()
}

// SetDests makes the Bind serve these destinations: new ones start direct,
// kept ones keep their path, removed ones lose their relay connection. A
// cluster whose server moved while it was relayed starts relayed at the new
// node (the network that blocked UDP still does; a probe finds out soon
// if not).
func (b *Bind) SetDests(ds []Dest) {
	b.mu.Lock()
	old := *b.dests.Load()
	relayed := map[string]bool{}
	for _, o := range old {
		o.mu.Lock()
		relayed[o.cid] = o.dec.path == Relay
		o.mu.Unlock()
	}
	next := make(map[netip.AddrPort]*dest, len(ds))
	now := b.cfg.Now()
	for _, d := range ds {
		if o, ok := old[d.Endpoint]; ok && o.url == d.RelayURL && o.cid == d.CID && o.dec.canAsk == d.Askable {
			next[d.Endpoint] = o
			continue
		}
		nd := newDest(b, d, now)
		if relayed[d.CID] && d.RelayURL != "" {
			nd.dec.switchTo(now, Relay, "the cluster's server moved while UDP got no answer: straight to the new node's relay")
			nd.logSwitch(Direct, Relay, nd.dec.reason)
		}
		next[d.Endpoint] = nd
	}
	b.dests.Store(&next)
	b.mu.Unlock()
	for ep, o := range old {
		if next[ep] != o {
			o.shut()
		}
	}
	for _, d := range next {
		d.start()
	}
	b.wake()
}

// NetworkChanged re-opens the question for every destination: the relay
// connections are re-made (their TCP connections went with the old
// network), a direct path must answer a handshake soon and a relayed one
// tries UDP at once.
func (b *Bind) NetworkChanged() {
	now := b.cfg.Now()
	for _, d := range *b.dests.Load() {
		d.mu.Lock()
		d.dec.networkChanged(now)
		d.captive = ""
		d.mu.Unlock()
		d.redial()
	}
	b.wake()
}

// ServerRestarted opens the question again for these clusters: each one's
// VPN server started again (a new epoch), and the daemon is about to
// re-create its peer, whose initiation goes at once. The path is decided
// again as at a connect (decider.serverRestarted): a relay taken while the
// server was down would otherwise carry the new server's first handshake
// alone, and UDP be tried no sooner than the next probe (5 s). The relay is
// the same gateway's, so its connection went with the old server: it is
// made again at once, whatever the backoff of the dials it refused while
// down. Call it before the peers are re-created.
func (b *Bind) ServerRestarted(cids ...string) {
	if len(cids) == 0 {
		return
	}
	now := b.cfg.Now()
	switched := false
	for _, d := range *b.dests.Load() {
		if slices.Contains(cids, d.cid) {
			switched = d.serverRestarted(now) || switched
		}
	}
	if switched {
		b.cfg.OnChange()
	}
	b.wake()
}

// State is one destination's path, for the daemon's status.
type State struct {
	CID      string
	Endpoint netip.AddrPort
	Path     Path
	Since    time.Time
	Reason   string // why it took this path
	RelayURL string
	RelayUp  bool   // the relay connection is open
	RelayErr string // why the relay could not be reached ("" when it could or was not tried)
	// Captive is set when the network in front of the relay redirects
	// plain HTTP elsewhere: a captive portal wants a sign-in first. It is
	// the portal's address when known.
	Captive string
}

// States reports every destination.
func (b *Bind) States() []State {
	var out []State
	for _, d := range *b.dests.Load() {
		out = append(out, d.state())
	}
	return out
}

func (b *Bind) wake() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// wakeFor wakes the loop for a wait that is due at due, unless its timer
// fires before that anyway. Without this, every batch sent after an
// answer came back (a bulk transfer: data out, ACKs in) began a new
// silence and woke the loop, one goroutine switch per batch, which cost
// the tunnel throughput against upstream wireguard-go (issue 24); the
// loop's tick re-arms its timer for the newest silence when it fires.
func (b *Bind) wakeFor(due time.Time) {
	if a := b.armed.Load(); a == 0 || due.UnixNano() < a {
		b.wake()
	}
}

// run ticks the deciders when the first of them is due (or something
// happened: a kick) and carries out what they ask.
func (b *Bind) run() {
	defer b.loop.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.kick:
		case <-t.C:
		}
		// Ticking: a wait that begins from here on kicks again, as the
		// deciders' state it saw may be read below before it was set.
		b.armed.Store(0)
		b.loops.Add(1)
		changed := false
		now := b.cfg.Now()
		var next time.Time
		for _, d := range *b.dests.Load() {
			a, due := d.tick(now)
			if !due.IsZero() && (next.IsZero() || due.Before(next)) {
				next = due
			}
			if a.keepalive {
				b.cfg.Keepalive(d.ep)
			}
			if a.probe {
				b.cfg.Rehandshake(d.ep)
			}
			if a.ask {
				b.cfg.Ask(d.ep)
			}
			changed = changed || a.switched
		}
		if changed {
			b.cfg.OnChange()
		}
		wait := time.Hour // until a kick
		if !next.IsZero() {
			// A little past the instant, so the tick sees it due.
			wait = max(next.Sub(b.cfg.Now())+time.Millisecond, time.Millisecond)
		}
		b.armed.Store(b.cfg.Now().Add(wait).UnixNano())
		t.Reset(wait)
	}
}

// Route sends bufs to ep over UDP, the relay, or (a probe) UDP only.
func (b *Bind) Route(udp conn.Bind, bufs [][]byte, ep conn.Endpoint) error {
	d := (*b.dests.Load())[addrPortOf(ep)]
	if d == nil || len(bufs) == 0 {
		return udp.Send(bufs, ep)
	}
	toUDP, toRelay := d.route(b.cfg.Now(), bufs)
	var errUDP, errRelay error
	if toUDP {
		errUDP = udp.Send(bufs, ep)
	}
	if toRelay {
		errRelay = d.sendRelay(bufs)
	}
	switch {
	case toUDP && toRelay && (errUDP == nil || errRelay == nil):
		return nil // racing: one path took it
	case errUDP != nil:
		return errUDP
	}
	return errRelay
}

// ObserveUDP notes what each destination answers over UDP: one note per
// run of datagrams from the same destination (a batch is mostly one
// peer's), a handshake response in it, else the type of its first.
func (b *Bind) ObserveUDP(bufs [][]byte, sizes []int, eps []conn.Endpoint, n int) {
	dests := *b.dests.Load()
	if len(dests) == 0 {
		return
	}
	now := b.cfg.Now()
	var last netip.AddrPort
	var d *dest
	typ := byte(0)
	first := true
	for i := 0; i < n; i++ {
		if sizes[i] == 0 {
			continue
		}
		t := relaywire.MessageType(bufs[i][:sizes[i]])
		if ap := addrPortOf(eps[i]); first || ap != last {
			if d != nil {
				d.received(now, typ, false)
			}
			last, d, typ, first = ap, dests[ap], t, false
		}
		if t == relaywire.MsgResponse {
			typ = t
		}
	}
	if d != nil {
		d.received(now, typ, false)
	}
}

// addrPortOf is an endpoint's destination address: directly for
// wireguard-go's standard endpoint, parsed for any other.
func addrPortOf(ep conn.Endpoint) netip.AddrPort {
	if s, ok := ep.(*conn.StdNetEndpoint); ok {
		return s.AddrPort
	}
	ap, _ := netip.ParseAddrPort(ep.DstToString())
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
