package dnsplit

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Upstream sockets: a fresh socket per query costs five system calls more
// than the query itself, which at a few thousand queries a second is most
// of the forwarder's work. So each server gets a few connected UDP sockets
// that many queries share, told apart by their (random) message IDs, as
// dnsmasq does. Each socket is retired after sockMaxUses queries or
// sockMaxAge, so the source port still changes often enough that an
// off-path attacker has port and ID to guess, not the ID alone.
const (
	sockPerServer = 4
	sockMaxUses   = 2048
	sockMaxAge    = 30 * time.Second
	sockIdle      = 2 * time.Minute // a server not asked for this long loses its sockets
)

// udpPools holds the sockets for every server asked.
type udpPools struct {
	mu    sync.Mutex
	pools map[netip.AddrPort]*udpPool
}

func (p *udpPools) get(s netip.AddrPort) *udpPool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pools == nil {
		p.pools = map[netip.AddrPort]*udpPool{}
	}
	now := time.Now()
	for k, pl := range p.pools {
		if k != s && pl.idleSince(now) > sockIdle {
			pl.close()
			delete(p.pools, k)
		}
	}
	pl := p.pools[s]
	if pl == nil {
		pl = &udpPool{server: s}
		p.pools[s] = pl
	}
	return pl
}

// udpPool is one server's sockets.
type udpPool struct {
	server netip.AddrPort
	mu     sync.Mutex
	socks  []*udpSock
	next   int
	last   time.Time
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
	for i := 0; i < len(pl.socks); {
		if s := pl.socks[i]; !s.usable(now) {
			s.retire()
			pl.socks = append(pl.socks[:i], pl.socks[i+1:]...)
			continue
		}
		i++
	}
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

func (pl *udpPool) close() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, s := range pl.socks {
		s.retire()
	}
	pl.socks = nil
}

// udpSock is one connected socket and the queries waiting on it.
type udpSock struct {
	conn *net.UDPConn
	born time.Time

	mu      sync.Mutex
	uses    int
	retired bool
	pending map[uint16]chan []byte
}

var errSockClosed = errors.New("upstream socket closed")

func dialUDPSock(server netip.AddrPort, now time.Time) (*udpSock, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
	if err != nil {
		return nil, err
	}
	s := &udpSock{conn: c, born: now, pending: map[uint16]chan []byte{}}
	go s.read()
	return s, nil
}

func (s *udpSock) usable(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.retired && s.uses < sockMaxUses && now.Sub(s.born) < sockMaxAge
}

// read hands each answer to the query with its ID. Only the server can
// answer: the socket is connected.
func (s *udpSock) read() {
	buf := make([]byte, dns.MaxMsgSize)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				// ICMP port unreachable and the like: keep reading; the
				// queries waiting time out and fail over.
				s.mu.Lock()
				retired := s.retired
				s.mu.Unlock()
				if !retired {
					continue
				}
			}
			s.failAll()
			return
		}
		if n < 12 {
			continue
		}
		id := binary.BigEndian.Uint16(buf)
		s.mu.Lock()
		ch := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if ch != nil {
			ch <- append([]byte(nil), buf[:n]...)
		}
	}
}

func (s *udpSock) failAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ch := range s.pending {
		close(ch)
		delete(s.pending, id)
	}
}

// register reserves a random ID not in flight on this socket.
func (s *udpSock) register() (uint16, chan []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired && len(s.pending) == 0 {
		return 0, nil, errSockClosed
	}
	for range 64 {
		id := dns.Id()
		if _, busy := s.pending[id]; !busy {
			ch := make(chan []byte, 1)
			s.pending[id] = ch
			s.uses++
			return id, ch, nil
		}
	}
	return 0, nil, errors.New("upstream socket has no free message ID")
}

func (s *udpSock) unregister(id uint16) {
	s.mu.Lock()
	delete(s.pending, id)
	closeNow := s.retired && len(s.pending) == 0
	s.mu.Unlock()
	if closeNow {
		s.conn.Close()
	}
}

// retire takes the socket out of use; it closes once its last query is
// answered or given up.
func (s *udpSock) retire() {
	s.mu.Lock()
	s.retired = true
	closeNow := len(s.pending) == 0
	s.mu.Unlock()
	if closeNow {
		s.conn.Close()
	}
}

// exchangeUDP sends query under an ID of the socket's choosing and returns
// the answer with the query's own ID put back.
func (p *udpPools) exchangeUDP(ctx context.Context, query []byte, server netip.AddrPort) ([]byte, error) {
	s, err := p.get(server).pick()
	if err != nil {
		return nil, err
	}
	id, ch, err := s.register()
	if err != nil {
		return nil, err
	}
	pkt := slices.Clone(query)
	binary.BigEndian.PutUint16(pkt, id)
	if _, err := s.conn.Write(pkt); err != nil {
		s.unregister(id)
		return nil, err
	}
	select {
	case b, ok := <-ch:
		s.unregister(id)
		if !ok {
			return nil, errSockClosed
		}
		copy(b, query[:2])
		return b, nil
	case <-ctx.Done():
		s.unregister(id)
		return nil, ctx.Err()
	}
}

func (p *udpPools) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, pl := range p.pools {
		pl.close()
		delete(p.pools, k)
	}
}

// netExchanger talks to real servers: UDP over shared sockets, TCP over a
// connection per query (rare: truncated answers, TCP clients).
type netExchanger struct {
	udp udpPools
}

func (e *netExchanger) exchange(ctx context.Context, query []byte, s netip.AddrPort, tcp bool) ([]byte, error) {
	if !tcp {
		return e.udp.exchangeUDP(ctx, query, s)
	}
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

func (e *netExchanger) close() { e.udp.close() }

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
