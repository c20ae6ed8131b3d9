package dnsplit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// forwardTable is what the forwarder routes by; it is replaced whole, never
// edited, so a query in flight sees one consistent table.
type forwardTable struct {
	zones     []zone           // cluster domains, longest first
	upstreams []netip.AddrPort // the original nameservers, in order
	timeout   time.Duration    // per upstream attempt
	// refuseOthers answers REFUSED for names outside the zones instead of
	// asking upstreams: systemd-resolved's splitter, which resolved only
	// ever asks for cluster names.
	refuseOthers bool
}

// zone is one cluster domain and the server that answers it.
type zone struct {
	suffix string // canonical: lower case, trailing dot
	cid    string
	server netip.AddrPort
}

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

// newForwardTable routes each route's domains to its server (port 53) and
// everything else to upstreams. self (the forwarder's own address) is never
// an upstream: that would be a loop.
func newForwardTable(routes []Route, upstreams []netip.AddrPort, timeout time.Duration, self netip.AddrPort) *forwardTable {
	t := &forwardTable{timeout: timeout}
	if t.timeout <= 0 {
		t.timeout = defaultUpstreamTimeout
	}
	for _, r := range routes {
		for _, d := range r.Domains {
			s := dns.CanonicalName(strings.TrimPrefix(d, "."))
			if s == "." || slices.ContainsFunc(t.zones, func(z zone) bool { return z.suffix == s }) {
				continue
			}
			t.zones = append(t.zones, zone{suffix: s, cid: r.CID, server: netip.AddrPortFrom(r.Server, 53)})
		}
	}
	slices.SortStableFunc(t.zones, func(a, b zone) int { return dns.CountLabel(b.suffix) - dns.CountLabel(a.suffix) })
	for _, u := range upstreams {
		if u != self && u.IsValid() && !slices.Contains(t.upstreams, u) {
			t.upstreams = append(t.upstreams, u)
		}
	}
	if len(t.upstreams) == 0 && len(upstreams) == 0 {
		// What glibc does with no nameserver line: ask the local host.
		t.upstreams = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}
	}
	return t
}

// route returns the zone a name falls in, if it is a cluster name.
func (t *forwardTable) route(qname string) (zone, bool) {
	for _, z := range t.zones {
		if dns.IsSubDomain(z.suffix, qname) {
			return z, true
		}
	}
	return zone{}, false
}

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

// serveUDP reads queries and starts each on its way upstream from this
// goroutine; the answer goes back to the client from whichever goroutine
// settles the query (the upstream socket's reader, or the sweeper). No
// goroutine is started and none handed a query per packet: that is what
// keeps the forwarder as cheap as dnsmasq per query.
func (f *forwarder) serveUDP() {
	defer f.wg.Done()
	sem := make(chan struct{}, maxInFlight)
	buf := make([]byte, dns.MaxMsgSize)
	for {
		n, from, err := f.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if f.closed.Load() {
				return
			}
			continue
		}
		if !f.serves(from) {
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // overloaded: the client will retry
		}
		f.start(slices.Clone(buf[:n]), false, func(out []byte) {
			if out != nil {
				if _, err := f.pc.WriteToUDPAddrPort(out, from); err == nil {
					f.answered()
				}
			}
			<-sem
		})
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

// start is everything the forwarder does with one packet from a client;
// reply is called exactly once, with the answer, or nil to send nothing (a
// response, or too short to answer: replying would let anyone bounce
// traffic off us). Only a query it packed itself from the parsed, checked
// one ever leaves for an upstream.
func (f *forwarder) start(raw []byte, tcp bool, reply func([]byte)) {
	if len(raw) < 12 || raw[2]&0x80 != 0 {
		reply(nil)
		return
	}
	req := new(dns.Msg)
	if err := req.Unpack(raw); err != nil {
		// The header is readable (12 bytes): say FORMERR under its ID.
		r := &dns.Msg{MsgHdr: dns.MsgHdr{Id: binary.BigEndian.Uint16(raw), Response: true,
			Opcode: int(raw[2]>>3) & 0xF, Rcode: dns.RcodeFormatError}}
		out, _ := r.Pack()
		reply(out)
		return
	}
	if req.Opcode != dns.OpcodeQuery {
		reply(packReply(req, dns.RcodeNotImplemented))
		return
	}
	if len(req.Question) != 1 || len(req.Answer) > 0 || len(req.Ns) > 0 {
		reply(packReply(req, dns.RcodeFormatError))
		return
	}
	q := req.Question[0]
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		if opt.Version() != 0 {
			// RFC 6891 6.1.3: unknown EDNS version.
			r := reply0(req, dns.RcodeBadVers)
			r.SetEdns0(dns.DefaultMsgSize, false)
			out, _ := r.Pack()
			reply(out)
			return
		}
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
	}
	if tcp {
		size = dns.MaxMsgSize
	}

	t := f.table.Load()
	targets := t.upstreams
	if z, cluster := t.route(strings.ToLower(q.Name)); cluster {
		// A cluster's names never leak to the public resolvers: if its
		// server is down they fail, they do not resolve elsewhere.
		targets = []netip.AddrPort{z.server}
	} else if t.refuseOthers {
		reply(packReply(req, dns.RcodeRefused))
		return
	} else {
		targets = f.byHealth(targets)
	}
	out := &dns.Msg{MsgHdr: req.MsgHdr, Question: []dns.Question{q}, Extra: onlyOPT(req.Extra)}
	out.Zero = false
	pkt, err := out.Pack()
	if err != nil {
		reply(packReply(req, dns.RcodeFormatError))
		return
	}
	p := &pending{f: f, req: req, pkt: pkt, qlen: questionLen(pkt), size: size, tcp: tcp, targets: targets,
		timeout: t.timeout, deadline: time.Now().Add(queryBudget), reply: reply}
	if f.counts != nil {
		f.counts.forwarded.Add(1)
	}
	p.next()
}

// pending is one client query on its way. Its attempts are made one after
// the other and each ends in exactly one call of result, so nothing in it
// is ever touched by two goroutines at once.
type pending struct {
	f        *forwarder
	req      *dns.Msg
	pkt      []byte // the query as sent upstream
	qlen     int
	size     int  // the client's buffer
	tcp      bool // the client came over TCP
	targets  []netip.AddrPort
	i        int  // the target being asked
	viaTCP   bool // asking targets[i] again over TCP after a truncated answer
	timeout  time.Duration
	deadline time.Time
	last     []byte // the last answer that came back, if only a refusal
	reply    func([]byte)
}

func (p *pending) next() {
	if p.i < len(p.targets) {
		if left := time.Until(p.deadline); left > 0 {
			p.f.ex.send(p.pkt, p.targets[p.i], p.tcp || p.viaTCP, min(p.timeout, left), p.result)
			return
		}
	}
	p.finish()
}

func (p *pending) result(r []byte, err error) {
	s := p.targets[p.i]
	if err == nil && !p.tcp && !p.viaTCP && len(r) >= 12 && r[2]&0x02 != 0 {
		p.viaTCP = true // truncated: the same server again, over TCP
		p.next()
		return
	}
	p.viaTCP = false
	p.i++
	switch {
	case err != nil:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			p.f.markFailed(s)
		}
		p.f.log.Debug("dns: upstream failed", "server", s, "name", p.req.Question[0].Name, "err", err)
	case !answers(r, p.pkt, p.qlen):
		p.f.log.Debug("dns: answer does not match the question", "server", s, "name", p.req.Question[0].Name)
	default:
		p.last = r
		if rc := r[3] & 0xF; rc != dns.RcodeServerFailure && rc != dns.RcodeRefused {
			p.finish()
			return
		}
		// SERVFAIL or REFUSED: as glibc does, the next server may know better.
	}
	p.next()
}

// finish answers the client: the last answer with the client's spelling of
// the question put back (same length: answers checked it matches ignoring
// case), fitted to its buffer; SERVFAIL if no server answered.
func (p *pending) finish() {
	if p.last == nil {
		p.reply(packReply(p.req, dns.RcodeServerFailure))
		return
	}
	copy(p.last[12:12+p.qlen], p.pkt[12:12+p.qlen])
	if len(p.last) > p.size {
		p.reply(truncate(p.last, p.size))
		return
	}
	p.reply(p.last)
}

// answers says whether r is a response to query: same ID, QR set, opcode
// QUERY, one question, the same question (names compared ignoring case).
func answers(r, query []byte, qlen int) bool {
	if len(r) < 12+qlen || r[0] != query[0] || r[1] != query[1] || r[2]&0x80 == 0 || r[2]&0x78 != 0 ||
		r[4] != 0 || r[5] != 1 {
		return false
	}
	for i := 12; i < 12+qlen; i++ {
		a, b := r[i], query[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// questionLen is the length of the question section of a query we packed
// (one uncompressed name, type, class).
func questionLen(query []byte) int {
	i := 12
	for i < len(query) && query[i] != 0 {
		i += int(query[i]) + 1
	}
	return i + 1 + 4 - 12
}

// truncate fits an answer into a client's UDP buffer the way a server
// would: as many whole records as fit, TC set if any were left out. One
// that does not parse is not sent at all: SERVFAIL instead.
func truncate(raw []byte, size int) []byte {
	m := new(dns.Msg)
	if err := m.Unpack(raw); err != nil {
		r := &dns.Msg{MsgHdr: dns.MsgHdr{Id: binary.BigEndian.Uint16(raw), Response: true, Rcode: dns.RcodeServerFailure}}
		out, _ := r.Pack()
		return out
	}
	m.Truncate(size)
	out, err := m.Pack()
	if err != nil {
		return nil
	}
	return out
}

// byHealth keeps the order of the servers but moves the ones that timed out
// recently to the end, so one dead nameserver does not cost every query a
// timeout.
func (f *forwarder) byHealth(ss []netip.AddrPort) []netip.AddrPort {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.failed) == 0 {
		return ss
	}
	now := f.now()
	var good, bad []netip.AddrPort
	for _, s := range ss {
		if at, ok := f.failed[s]; ok && now.Sub(at) < failMemory {
			bad = append(bad, s)
		} else {
			delete(f.failed, s)
			good = append(good, s)
		}
	}
	return append(good, bad...)
}

func (f *forwarder) markFailed(s netip.AddrPort) {
	f.mu.Lock()
	f.failed[s] = f.now()
	f.mu.Unlock()
}

// reply0 is an empty answer to req with rcode.
func reply0(req *dns.Msg, rcode int) *dns.Msg {
	r := new(dns.Msg)
	r.SetRcode(req, rcode)
	r.RecursionAvailable = true
	return r
}

func packReply(req *dns.Msg, rcode int) []byte {
	out, err := reply0(req, rcode).Pack()
	if err != nil {
		return nil
	}
	return out
}

// onlyOPT keeps the client's EDNS record (its buffer size, DO bit, cookie)
// and drops anything else from the additional section, such as a TSIG
// meant for us, which an upstream would reject.
func onlyOPT(extra []dns.RR) []dns.RR {
	for _, rr := range extra {
		if opt, ok := rr.(*dns.OPT); ok {
			return []dns.RR{opt}
		}
	}
	return nil
}
