package dnsplit

import (
	"context"
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

// exchanger sends one query to one server; the forwarder's only network
// side effect on the upstream side, injected by tests.
type exchanger interface {
	exchange(ctx context.Context, m *dns.Msg, server netip.AddrPort, tcp bool) (*dns.Msg, error)
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

	servers []*dns.Server
	done    chan error
}

func newForwarder(log *slog.Logger, now func() time.Time, ex exchanger, t *forwardTable) *forwarder {
	if ex == nil {
		ex = newNetExchanger()
	}
	f := &forwarder{log: log, now: now, ex: ex, failed: map[netip.AddrPort]time.Time{}}
	f.table.Store(t)
	return f
}

// setTable swaps the routing table; queries in flight finish on the old one.
func (f *forwarder) setTable(t *forwardTable) { f.table.Store(t) }

// listen serves UDP and TCP on addr. Both sockets are bound before it
// returns, so an address in use is reported here, not later.
func (f *forwarder) listen(addr netip.AddrPort) error {
	pc, err := net.ListenPacket("udp", addr.String())
	if err != nil {
		return fmt.Errorf("forwarder: listen udp %s: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		pc.Close()
		return fmt.Errorf("forwarder: listen tcp %s: %w", addr, err)
	}
	f.done = make(chan error, 2)
	f.servers = []*dns.Server{
		{PacketConn: pc, Handler: f, UDPSize: dns.DefaultMsgSize},
		{Listener: ln, Handler: f, ReadTimeout: 10 * time.Second, IdleTimeout: func() time.Duration { return 10 * time.Second }},
	}
	for _, s := range f.servers {
		go func() { f.done <- s.ActivateAndServe() }()
	}
	return nil
}

// close stops serving and waits for the servers to return.
func (f *forwarder) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range f.servers {
		_ = s.ShutdownContext(ctx)
	}
	for range f.servers {
		select {
		case <-f.done:
		case <-ctx.Done():
		}
	}
	f.servers = nil
}

// ServeDNS answers one query. miekg/dns has already refused what does not
// parse; this checks the rest of what it forwards, because only a query it
// built itself from a checked one ever leaves for an upstream.
func (f *forwarder) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp := f.answer(req, isTCP(w))
	if resp == nil {
		return // not a query: answering a response could be used to amplify
	}
	_ = w.WriteMsg(resp)
}

func isTCP(w dns.ResponseWriter) bool {
	_, ok := w.LocalAddr().(*net.TCPAddr)
	return ok
}

// answer is the whole of the forwarder's logic for one query, kept apart
// from the sockets so that fuzzing reaches all of it.
func (f *forwarder) answer(req *dns.Msg, tcp bool) *dns.Msg {
	if req.Response {
		return nil
	}
	if req.Opcode != dns.OpcodeQuery {
		return reply(req, dns.RcodeNotImplemented)
	}
	if len(req.Question) != 1 || len(req.Answer) > 0 || len(req.Ns) > 0 {
		return reply(req, dns.RcodeFormatError)
	}
	q := req.Question[0]
	if _, ok := dns.IsDomainName(q.Name); !ok || q.Qclass == dns.ClassNONE {
		return reply(req, dns.RcodeFormatError)
	}
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil {
		if opt.Version() != 0 {
			// RFC 6891 6.1.3: unknown EDNS version.
			r := reply(req, dns.RcodeBadVers)
			r.SetEdns0(dns.DefaultMsgSize, false)
			return r
		}
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
	}
	if tcp {
		size = dns.MaxMsgSize
	}

	t := f.table.Load()
	name := strings.ToLower(q.Name)
	targets := t.upstreams
	z, cluster := t.route(name)
	if cluster {
		// A cluster's names never leak to the public resolvers: if its
		// server is down they fail, they do not resolve elsewhere.
		targets = []netip.AddrPort{z.server}
	} else {
		targets = f.byHealth(targets)
	}

	out := &dns.Msg{MsgHdr: req.MsgHdr, Question: []dns.Question{q}, Extra: onlyOPT(req.Extra)}
	out.Id = dns.Id() // our own ID upstream: the client's is not ours to trust
	out.Zero = false

	ctx, cancel := context.WithTimeout(context.Background(), queryBudget)
	defer cancel()
	var last *dns.Msg
	for _, s := range targets {
		r, err := f.try(ctx, out, s, tcp, t.timeout)
		if err != nil {
			f.log.Debug("dns: upstream failed", "server", s, "name", q.Name, "err", err)
			continue
		}
		last = r
		if r.Rcode == dns.RcodeServerFailure || r.Rcode == dns.RcodeRefused {
			continue // as glibc does: the next server may know better
		}
		break
	}
	if last == nil {
		return reply(req, dns.RcodeServerFailure)
	}
	last.Id = req.Id
	last.Question = req.Question // the client's spelling (0x20 case) back
	if !tcp {
		last.Truncate(size)
	}
	return last
}

// try asks one server within the per-attempt timeout, over TCP when the
// client asked over TCP or the UDP answer came back truncated.
func (f *forwarder) try(ctx context.Context, m *dns.Msg, s netip.AddrPort, tcp bool, timeout time.Duration) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := f.ex.exchange(ctx, m, s, tcp)
	if err == nil && r.Truncated && !tcp {
		r, err = f.ex.exchange(ctx, m, s, true)
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			f.markFailed(s)
		}
		return nil, err
	}
	if !r.Response || len(r.Question) != 1 || !strings.EqualFold(r.Question[0].Name, m.Question[0].Name) ||
		r.Question[0].Qtype != m.Question[0].Qtype {
		return nil, fmt.Errorf("answer from %s does not match the question", s)
	}
	return r, nil
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

// reply is an empty answer to req with rcode.
func reply(req *dns.Msg, rcode int) *dns.Msg {
	r := new(dns.Msg)
	r.SetRcode(req, rcode)
	r.RecursionAvailable = true
	return r
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

// netExchanger talks to real servers.
type netExchanger struct {
	udp, tcp *dns.Client
}

func newNetExchanger() *netExchanger {
	return &netExchanger{
		udp: &dns.Client{Net: "udp", UDPSize: dns.MaxMsgSize},
		tcp: &dns.Client{Net: "tcp"},
	}
}

func (e *netExchanger) exchange(ctx context.Context, m *dns.Msg, s netip.AddrPort, tcp bool) (*dns.Msg, error) {
	c := e.udp
	if tcp {
		c = e.tcp
	}
	r, _, err := c.ExchangeContext(ctx, m, s.String())
	return r, err
}
