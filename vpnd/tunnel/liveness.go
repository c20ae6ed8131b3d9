package tunnel

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/runos/vpn/vpnd/wgcfg"
)

// Liveness: whether a server still answers is read from the device's byte
// counters, never assumed from a handshake alone (a handshake stays "fresh"
// for minutes after its server died). Each read notes when the received
// count last grew and when the sent count first grew after that; vpnd/state
// turns "sending, and nothing back for 15 s" into peerUp false.
//
// An idle tunnel sends only keepalives, which WireGuard never answers, so
// silence alone would say nothing. So when nothing has come back for
// probeAfter, the daemon's read sends a probe through the tunnel: a DNS
// question for the root to the cluster's DNS server (on the VPN server's
// address), which answers at once (with anything: only the bytes coming
// back count). An idle, healthy tunnel thus costs one question every 5 s;
// a dead server is seen within 15-20 s of its last answer.
const probeAfter = 5 * time.Second

// tracked is the engine's memory of a peer it configured: for the nudges
// (nudge.go) and for liveness.
type tracked struct {
	addedAt   time.Time
	askedAt   time.Time // last (re)creation: an initiation went out then
	nudges    int
	nextNudge time.Time
	retries   uint64 // re-creations by Nudge: initiations that went unanswered

	rx, tx    uint64    // the counters at the last read
	lastRx    time.Time // when rx last grew
	sentSince time.Time // when tx first grew after lastRx; zero: nothing since
	lastProbe time.Time
}

func newTracked(now time.Time) *tracked {
	t := &tracked{addedAt: now}
	t.asked(now)
	return t
}

// asked notes a (re)creation of the peer: its counters start again at 0.
func (t *tracked) asked(now time.Time) {
	t.askedAt, t.nudges, t.nextNudge = now, 0, now.Add(firstNudge)
	t.rx, t.tx = 0, 0
}

// observe takes a read of the counters. Both growing between two reads
// cannot be ordered: that is taken as an answer followed by a send, so the
// silence clock starts again at this read.
func (t *tracked) observe(now time.Time, rx, tx uint64) {
	if rx < t.rx || tx < t.tx { // the peer was re-created under us
		t.rx, t.tx = rx, tx
	}
	if rx > t.rx {
		t.rx, t.lastRx, t.sentSince = rx, now, time.Time{}
	}
	if tx > t.tx {
		t.tx = tx
		if t.sentSince.IsZero() {
			t.sentSince = now
		}
	}
}

// probeDue says whether p should get a probe at now: it has answered
// before (a server never heard from is the handshake's business), and
// neither an answer nor a probe came within probeAfter.
func (t *tracked) probeDue(now time.Time) bool {
	return !t.lastRx.IsZero() && now.Sub(t.lastRx) >= probeAfter && now.Sub(t.lastProbe) >= probeAfter
}

// Probe sends a probe through the tunnel to each peer that is due (see
// above). The daemon calls it after its reads of the device.
func (e *Engine) Probe() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	now := e.now()
	for _, p := range e.applied.Peers {
		t, ok := e.peers[p.PublicKey]
		if !ok || !p.Probe.IsValid() || !t.probeDue(now) {
			continue
		}
		t.lastProbe = now
		if !e.sendProbe(p) {
			return
		}
	}
}

// askAt sends the probe through the tunnel to each peer whose endpoint is
// ep, now: the relay Bind's question for a silence in which wireguard-go
// may not start a handshake (vpnd/relay Config.Ask). Its answer over UDP
// tells the Bind that UDP still works.
func (e *Engine) askAt(ep netip.AddrPort) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	for _, p := range e.applied.Peers {
		if p.Endpoint != ep || !p.Probe.IsValid() {
			continue
		}
		if t, ok := e.peers[p.PublicKey]; ok {
			t.lastProbe = e.now()
		}
		if !e.sendProbe(p) {
			return
		}
	}
}

// sendProbe sends p's probe, opening the probes' socket at the first; it
// reports false when that socket cannot be opened. e.mu held.
func (e *Engine) sendProbe(p wgcfg.Peer) bool {
	if e.probe == nil {
		pr, err := openProber()
		if err != nil {
			e.log.Warn("cannot probe the VPN servers", "err", err)
			return false
		}
		e.probe = pr
	}
	if err := e.probe.send(p.Probe); err != nil {
		e.log.Debug("probe", "cid", p.CID, "to", p.Probe, "err", err)
	}
	return true
}

// prober is the one UDP socket probes leave from; the kernel routes them
// into the tunnel (the cluster's subnet goes through it) from the device's
// tunnel address. Answers are read and dropped: the device has counted
// them already.
type prober struct {
	conn *net.UDPConn
	msg  []byte
}

func openProber() (*prober, error) {
	c, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	m.SetQuestion(".", dns.TypeNS)
	m.RecursionDesired = false
	b, err := m.Pack()
	if err != nil {
		c.Close()
		return nil, err
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := c.ReadFromUDPAddrPort(buf); errors.Is(err, net.ErrClosed) {
				return
			} else if err != nil {
				time.Sleep(100 * time.Millisecond) // never spin on an error
			}
		}
	}()
	return &prober{conn: c, msg: b}, nil
}

func (p *prober) send(to netip.AddrPort) error {
	_, err := p.conn.WriteToUDPAddrPort(p.msg, to)
	return err
}

func (p *prober) close() { p.conn.Close() }
