package dnsplit

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	defaultUpstreamTimeout = 2 * time.Second
	// queryBudget bounds one query's work across every upstream tried,
	// below glibc's default 5 s so the client still gets our answer.
	queryBudget = 4500 * time.Millisecond
	// failMemory is how long an upstream that timed out is tried last.
	failMemory = 30 * time.Second
	// maxInFlight bounds the UDP queries being answered at once (dnsmasq's
	// dns-forward-max is 150); past it a query is dropped and the client
	// retries, rather than the forwarder growing without bound.
	maxInFlight = 1024
	// TCP clients (tcpconns.go): at most maxTCPConns, maxTCPPerSource from
	// one address; the longest idle goes when a new one needs the room.
	maxTCPConns     = 128
	maxTCPPerSource = 32
	tcpIdle         = 10 * time.Second
)

// forwarder is the built-in resolver resolv.conf points at: cluster names go
// to their cluster's DNS server through the tunnel, everything else to the
// nameservers resolv.conf had before, in order, with failover.
type forwarder struct {
	log   *slog.Logger
	now   func() time.Time
	ex    exchanger
	table atomic.Pointer[forwardTable]

	mu     sync.Mutex
	failed map[netip.AddrPort]time.Time // last timeout per upstream

	// only, when set, is the one source address served: the splitter on the
	// tunnel's own address answers the local host, never a packet that
	// came in through the tunnel (the kernel drops those that claim a local
	// source as martians, and wireguard-go those outside a peer's allowed
	// IPs).
	only netip.Addr

	pc     *net.UDPConn
	ln     net.Listener
	wg     sync.WaitGroup
	closed atomic.Bool
	tcp    *tcpConns // TCP clients, bounded; hung up on by close

	counts *queryCounts // nil: not counted
}

// queryCounts are a configurator's forwarder counters; the configurator
// keeps them across the forwarders it starts and stops.
type queryCounts struct{ answered, forwarded atomic.Uint64 }

// answered counts an answer written to a client.
func (f *forwarder) answered() {
	if f.counts != nil {
		f.counts.answered.Add(1)
	}
}

func (c *queryCounts) queries() Queries {
	return Queries{Answered: c.answered.Load(), Forwarded: c.forwarded.Load()}
}

func newForwarder(log *slog.Logger, now func() time.Time, ex exchanger, t *forwardTable) *forwarder {
	if ex == nil {
		ex = &netExchanger{}
	}
	f := &forwarder{log: log, now: now, ex: ex, failed: map[netip.AddrPort]time.Time{}, tcp: newTCPConns(maxTCPConns, maxTCPPerSource)}
	f.table.Store(t)
	return f
}

// setTable swaps the routing table; queries in flight finish on the old one.
func (f *forwarder) setTable(t *forwardTable) { f.table.Store(t) }

// listen serves UDP and TCP on addr. Both sockets are bound before it
// returns, so an address in use is reported here, not later.
func (f *forwarder) listen(addr netip.AddrPort) error {
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return fmt.Errorf("forwarder: listen udp %s: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		pc.Close()
		return fmt.Errorf("forwarder: listen tcp %s: %w", addr, err)
	}
	f.pc, f.ln = pc, ln
	f.wg.Add(2)
	go f.serveUDP()
	go f.serveTCP()
	return nil
}

// close stops serving: queries in flight fail at once (the exchanger
// closes first), TCP clients are hung up on, and it returns when every
// goroutine of the forwarder has.
func (f *forwarder) close() {
	f.closed.Store(true)
	if f.pc != nil {
		f.pc.Close()
		f.ln.Close()
	}
	if c, ok := f.ex.(interface{ close() }); ok {
		c.close()
	}
	f.tcp.closeAll()
	f.wg.Wait()
}

// serveUDP reads queries, a batch at a time (batch.go), and starts each
// on its way upstream from this goroutine; the answer goes back to the
// client from whichever goroutine settles the query (the upstream socket's
// reader, or the sweeper). No goroutine is started and none handed a query
// per packet: that is what keeps the forwarder as cheap as dnsmasq per
// query.
func (f *forwarder) serveUDP() {
	defer f.wg.Done()
	sem := make(chan struct{}, maxInFlight)
	rd := newPacketReader(f.pc, clientBatch, maxQueryUDP)
	for {
		ds, err := rd.read()
		if err != nil {
			if f.closed.Load() {
				return
			}
			continue
		}
		for _, d := range ds {
			if d.trunc || !f.serves(d.from) {
				continue // longer than any query, or from a client not served
			}
			select {
			case sem <- struct{}{}:
			default:
				continue // overloaded: the client will retry
			}
			from := d.from
			f.start(slices.Clone(d.b), false, func(out []byte) {
				if out != nil {
					if _, err := f.pc.WriteToUDPAddrPort(out, from); err == nil {
						f.answered()
					}
				}
				<-sem
			})
		}
	}
}

// serveTCP answers length-prefixed queries (RFC 7766), one at a time per
// connection, closing connections idle for tcpIdle, and the longest idle
// one when a new client needs its room (tcpConns).
func (f *forwarder) serveTCP() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if f.closed.Load() {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		ta, ok := c.RemoteAddr().(*net.TCPAddr)
		if !ok || !f.serves(ta.AddrPort()) {
			c.Close()
			continue
		}
		tc := f.tcp.admit(c, ta.AddrPort().Addr().Unmap(), f.now())
		if tc == nil {
			continue // every connection is busy with a query: the client retries
		}
		f.wg.Add(1)
		go func() {
			defer func() {
				f.tcp.remove(tc)
				c.Close()
				f.wg.Done()
			}()
			for !f.closed.Load() {
				_ = c.SetDeadline(time.Now().Add(tcpIdle))
				pkt, err := readTCPMsg(c)
				if err != nil {
					return
				}
				f.tcp.setBusy(tc, true, f.now())
				out := f.handlePacket(pkt, true)
				if out == nil {
					return
				}
				if err := writeTCPMsg(c, out); err != nil {
					return
				}
				f.tcp.setBusy(tc, false, f.now())
				f.answered()
			}
		}()
	}
}

// serves says whether a client at from may ask.
func (f *forwarder) serves(from netip.AddrPort) bool {
	return !f.only.IsValid() || from.Addr().Unmap() == f.only
}

// handlePacket answers one packet from a client and waits for the answer:
// the TCP path, and the fuzz target (it goes through all of start).
func (f *forwarder) handlePacket(raw []byte, tcp bool) []byte {
	ch := make(chan []byte, 1)
	f.start(raw, tcp, func(out []byte) { ch <- out })
	return <-ch
}
