package dnsplit

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// exchanger sends one packed query to one server and calls done exactly
// once: with the answer (under the query's own ID), or with an error
// (errUpstreamTimeout after timeout). It is the forwarder's only network
// side effect towards upstreams; tests stand in for it.
type exchanger interface {
	send(query []byte, server netip.AddrPort, tcp bool, timeout time.Duration, done func(answer []byte, err error))
}

// errUpstreamTimeout is a net.Error whose Timeout is true.
var errUpstreamTimeout error = &net.OpError{Op: "read", Net: "udp", Err: context.DeadlineExceeded}

// Upstream sockets: a fresh socket per query costs five system calls more
// than the query itself, which at a few thousand queries a second is most
// of a forwarder's work. So each server gets a few connected UDP sockets
// that many queries share, told apart by their (random) message IDs, as
// dnsmasq does, and an answer is handled on the socket's reader goroutine
// with no hand-off. Each socket is retired after sockMaxUses queries or
// sockMaxAge, so the source port still changes often enough that an
// off-path attacker has port and ID to guess, not the ID alone.
const (
	sockPerServer = 4
	sockMaxUses   = 2048
	sockMaxAge    = 30 * time.Second
	sockIdle      = 2 * time.Minute // a server not asked for this long loses its sockets
)

// netExchanger talks to real servers: UDP over shared sockets, TCP over a
// connection per query (rare: truncated answers, TCP clients).
type netExchanger struct {
	mu       sync.Mutex
	pools    map[netip.AddrPort]*udpPool
	sweeping bool // a sweeper runs while queries are pending
	closed   bool
}

// sweepEvery is how finely UDP timeouts are kept. One sweeper per
// exchanger instead of a timer per query: arming a timer earlier than the
// runtime's next one wakes a sleeping thread, once per query, which costs
// more than the query.
const sweepEvery = 20 * time.Millisecond

// sweep expires overdue queries until none is pending, then stops, so an
// idle daemon is never woken.
func (e *netExchanger) sweep() {
	for {
		time.Sleep(sweepEvery)
		now := time.Now()
		e.mu.Lock()
		pools := slices.Collect(maps.Values(e.pools))
		e.mu.Unlock()
		left := 0
		for _, pl := range pools {
			left += pl.expire(now)
		}
		if left == 0 {
			e.mu.Lock()
			// A send that came in since holds e.mu to check sweeping; so
			// look once more under the lock before stopping.
			for _, pl := range e.pools {
				left += pl.pendingCount()
			}
			if left == 0 {
				e.sweeping = false
				e.mu.Unlock()
				return
			}
			e.mu.Unlock()
		}
	}
}

func (e *netExchanger) ensureSweeper() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.sweeping {
		e.sweeping = true
		go e.sweep()
	}
}

func (e *netExchanger) send(query []byte, server netip.AddrPort, tcp bool, timeout time.Duration, done func([]byte, error)) {
	if tcp {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			done(exchangeTCP(ctx, query, server))
		}()
		return
	}
	pl := e.pool(server)
	if pl == nil {
		done(nil, errSockClosed)
		return
	}
	s, err := pl.pick()
	if err != nil {
		done(nil, err)
		return
	}
	s.send(query, timeout, done)
	e.ensureSweeper()
}

func (e *netExchanger) pool(s netip.AddrPort) *udpPool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	if e.pools == nil {
		e.pools = map[netip.AddrPort]*udpPool{}
	}
	pl := e.pools[s]
	if pl == nil {
		now := time.Now()
		for k, old := range e.pools {
			if old.idleSince(now) > sockIdle {
				old.shut()
				delete(e.pools, k)
			}
		}
		pl = &udpPool{server: s}
		e.pools[s] = pl
	}
	return pl
}

// close fails every query in flight at once (they answer SERVFAIL) and
// refuses new ones.
func (e *netExchanger) close() {
	e.mu.Lock()
	pools := e.pools
	e.pools, e.closed = nil, true
	e.mu.Unlock()
	for _, pl := range pools {
		pl.shut()
	}
}

// udpPool is one server's sockets.
type udpPool struct {
	server   netip.AddrPort
	mu       sync.Mutex
	socks    []*udpSock // taking new queries
	draining []*udpSock // retired, answering the last of theirs
	next     int
	last     time.Time
}

func (pl *udpPool) idleSince(now time.Time) time.Duration {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return now.Sub(pl.last)
}

// pick returns a socket with room for one more query, opening or replacing
// sockets as they age.
func (pl *udpPool) pick() (*udpSock, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	now := time.Now()
	pl.last = now
	pl.socks = slices.DeleteFunc(pl.socks, func(s *udpSock) bool {
		if s.usable(now) {
			return false
		}
		s.retire()
		pl.draining = append(pl.draining, s)
		return true
	})
	if len(pl.socks) < sockPerServer {
		s, err := dialUDPSock(pl.server, now)
		if err != nil {
			return nil, err
		}
		pl.socks = append(pl.socks, s)
	}
	pl.next = (pl.next + 1) % len(pl.socks)
	return pl.socks[pl.next], nil
}

// expire settles this server's overdue queries and says how many remain.
func (pl *udpPool) expire(now time.Time) int {
	pl.mu.Lock()
	socks := append(slices.Clone(pl.socks), pl.draining...)
	pl.mu.Unlock()
	left := 0
	for _, s := range socks {
		left += s.expire(now)
	}
	pl.mu.Lock()
	pl.draining = slices.DeleteFunc(pl.draining, func(s *udpSock) bool { return s.pendingCount() == 0 })
	pl.mu.Unlock()
	return left
}

func (pl *udpPool) pendingCount() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	n := 0
	for _, s := range append(slices.Clone(pl.socks), pl.draining...) {
		n += s.pendingCount()
	}
	return n
}

// shut closes every socket now: their readers fail what is pending.
func (pl *udpPool) shut() {
	pl.mu.Lock()
	socks := append(pl.socks, pl.draining...)
	pl.socks, pl.draining = nil, nil
	pl.mu.Unlock()
	for _, s := range socks {
		s.mu.Lock()
		s.retired = true
		s.mu.Unlock()
		s.conn.Close()
	}
}

// udpSock is one connected socket and the queries waiting on it.
type udpSock struct {
	conn *net.UDPConn
	born time.Time

	mu      sync.Mutex
	uses    int
	retired bool
	pending map[uint16]*waiter
}

// waiter is one query in flight on a socket: whoever takes it from the map
// (the reader with its answer, the sweeper, a failed write, the socket
// closing) is the one who calls done.
type waiter struct {
	qid      [2]byte // the query's own ID, put back into the answer
	done     func([]byte, error)
	deadline time.Time
}

var errSockClosed = errors.New("upstream socket closed")

func dialUDPSock(server netip.AddrPort, now time.Time) (*udpSock, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
	if err != nil {
		return nil, err
	}
	s := &udpSock{conn: c, born: now, pending: map[uint16]*waiter{}}
	go s.read()
	return s, nil
}

func (s *udpSock) usable(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.retired && s.uses < sockMaxUses && now.Sub(s.born) < sockMaxAge
}

// send writes query under a random ID free on this socket.
func (s *udpSock) send(query []byte, timeout time.Duration, done func([]byte, error)) {
	pkt := slices.Clone(query)
	s.mu.Lock()
	var id uint16
	for tries := 0; ; tries++ {
		id = dns.Id()
		if _, busy := s.pending[id]; !busy {
			break
		}
		if tries == 64 {
			s.mu.Unlock()
			done(nil, errors.New("upstream socket has no free message ID"))
			return
		}
	}
	s.pending[id] = &waiter{qid: [2]byte{query[0], query[1]}, done: done, deadline: time.Now().Add(timeout)}
	s.uses++
	s.mu.Unlock()

	binary.BigEndian.PutUint16(pkt, id)
	if _, err := s.conn.Write(pkt); err != nil {
		if w := s.take(id); w != nil {
			w.done(nil, err)
		}
	}
}

// take removes and returns the waiter for id, closing a retired socket once
// its last query is settled.
func (s *udpSock) take(id uint16) *waiter {
	s.mu.Lock()
	w := s.pending[id]
	delete(s.pending, id)
	closeNow := w != nil && s.retired && len(s.pending) == 0
	s.mu.Unlock()
	if closeNow {
		s.conn.Close()
	}
	return w
}

// read hands each answer to the query with its ID, on this goroutine, a
// batch at a time (batch.go). Only the server can answer: the socket is
// connected. An answer longer than the reader's buffer goes to its query
// marked truncated, so that it asks again over TCP.
func (s *udpSock) read() {
	rd := newPacketReader(s.conn, answerBatch, maxAnswerUDP)
	for {
		ds, err := rd.read()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				s.failAll()
				return
			}
			// ICMP port unreachable and the like: the queries waiting time
			// out and fail over.
			continue
		}
		for _, d := range ds {
			if len(d.b) < 12 {
				continue
			}
			if w := s.take(binary.BigEndian.Uint16(d.b)); w != nil {
				b := slices.Clone(d.b)
				b[0], b[1] = w.qid[0], w.qid[1]
				if d.trunc {
					b[2] |= 0x02 // TC
				}
				w.done(b, nil)
			}
		}
	}
}

func (s *udpSock) failAll() {
	s.mu.Lock()
	ws := s.pending
	s.pending = map[uint16]*waiter{}
	s.mu.Unlock()
	for _, w := range ws {
		w.done(nil, errSockClosed)
	}
}

func (s *udpSock) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// expire settles the queries past their deadline and says how many remain.
func (s *udpSock) expire(now time.Time) int {
	var over []*waiter
	s.mu.Lock()
	for id, w := range s.pending {
		if !now.Before(w.deadline) {
			over = append(over, w)
			delete(s.pending, id)
		}
	}
	left := len(s.pending)
	closeNow := len(over) > 0 && s.retired && left == 0
	s.mu.Unlock()
	if closeNow {
		s.conn.Close()
	}
	for _, w := range over {
		w.done(nil, errUpstreamTimeout)
	}
	return left
}

// retire takes the socket out of use; it closes once its last query is
// settled.
func (s *udpSock) retire() {
	s.mu.Lock()
	s.retired = true
	closeNow := len(s.pending) == 0
	s.mu.Unlock()
	if closeNow {
		s.conn.Close()
	}
}

// exchangeTCP asks over a connection of its own (RFC 7766).
func exchangeTCP(ctx context.Context, query []byte, s netip.AddrPort) ([]byte, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if err := writeTCPMsg(c, query); err != nil {
		return nil, err
	}
	return readTCPMsg(c)
}

// readTCPMsg reads one length-prefixed DNS message (RFC 1035 4.2.2).
func readTCPMsg(r io.Reader) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

func writeTCPMsg(w io.Writer, m []byte) error {
	if len(m) > dns.MaxMsgSize {
		return errors.New("message too long for TCP")
	}
	b := make([]byte, 2+len(m))
	binary.BigEndian.PutUint16(b, uint16(len(m)))
	copy(b[2:], m)
	_, err := w.Write(b)
	return err
}
