package dnsplit

import (
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// clusterAt routes domain to a test server on any port (real routes always
// use port 53).
func tableWith(clusters map[string]netip.AddrPort, upstreams ...netip.AddrPort) *forwardTable {
	var routes []Route
	for d, s := range clusters {
		routes = append(routes, Route{CID: "c" + d[:3], Server: s.Addr(), Domains: []string{d}})
	}
	t := newForwardTable(routes, upstreams, 500*time.Millisecond, netip.AddrPort{})
	for i, z := range t.zones {
		t.zones[i].server = clusters[z.suffix[:len(z.suffix)-1]]
	}
	return t
}

// startForwarder runs a real forwarder on a free loopback port.
func startForwarder(t testing.TB, table *forwardTable) (*forwarder, netip.AddrPort) {
	return startCountingForwarder(t, table, nil)
}

// startCountingForwarder is startForwarder whose forwarder counts into c.
func startCountingForwarder(t testing.TB, table *forwardTable, c *queryCounts) (*forwarder, netip.AddrPort) {
	t.Helper()
	f := newForwarder(slog.New(slog.DiscardHandler), time.Now, nil, table)
	f.counts = c
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := netip.MustParseAddrPort(pc.LocalAddr().String())
		pc.Close()
		if err := f.listen(addr); err == nil {
			t.Cleanup(f.close)
			return f, addr
		}
	}
	t.Fatal("no free port for the forwarder")
	return nil, netip.AddrPort{}
}

func TestForwarderSplitsClusterNamesFromTheRest(t *testing.T) {
	cluster := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("100.100.1.1"), only: "ky3.rjwrn.example.com"})
	other := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("100.100.2.1"), only: "xym.rjwrn.example.com"})
	orig := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("198.51.100.21")})
	_, fwd := startForwarder(t, tableWith(map[string]netip.AddrPort{
		"ky3.rjwrn.example.com": cluster.addr,
		"xym.rjwrn.example.com": other.addr,
	}, orig.addr))

	cases := []struct {
		name, want string
		srv        *testServer
	}{
		{"app.ky3.rjwrn.example.com", "100.100.1.1", cluster},
		{"ky3.rjwrn.example.com", "100.100.1.1", cluster},
		{"K8S.Ky3.RJWRN.example.com", "100.100.1.1", cluster},
		{"harbor.xym.rjwrn.example.com", "100.100.2.1", other},
		{"www.example.test", "198.51.100.21", orig},
		{"notky3.rjwrn.example.com", "198.51.100.21", orig}, // a suffix of labels, not of characters
		{"rjwrn.example.com", "198.51.100.21", orig},
	}
	for _, c := range cases {
		for _, network := range []string{"udp", "tcp"} {
			before := c.srv.hits()
			r := ask(t, fwd, network, c.name, dns.TypeA, 0)
			if got := firstA(r); got != c.want {
				t.Errorf("%s over %s: got %q (rcode %s), want %s", c.name, network, got, dns.RcodeToString[r.Rcode], c.want)
			}
			if c.srv.hits() != before+1 {
				t.Errorf("%s over %s: not answered by the expected server", c.name, network)
			}
			if r.Question[0].Name != dns.Fqdn(c.name) {
				t.Errorf("question came back as %q, want the client's spelling %q", r.Question[0].Name, c.name)
			}
		}
	}
	if n := cluster.tcpHits.Load(); n == 0 {
		t.Error("a query over TCP from the client was not forwarded over TCP")
	}
}

func TestForwarderFailsOverInOrder(t *testing.T) {
	dead, deadHits := blackhole(t)
	refusing := startDNS(t, "", serverBehaviour{rcode: dns.RcodeRefused})
	failing := startDNS(t, "", serverBehaviour{rcode: dns.RcodeServerFailure})
	good := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("192.0.2.7")})
	second := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("192.0.2.8")})
	f, fwd := startForwarder(t, tableWith(nil, dead, refusing.addr, failing.addr, good.addr, second.addr))

	r := ask(t, fwd, "udp", "www.example.test", dns.TypeA, 0)
	if got := firstA(r); got != "192.0.2.7" {
		t.Fatalf("got %q (%s), want the first server that answers, 192.0.2.7", got, dns.RcodeToString[r.Rcode])
	}
	if deadHits.Load() != 1 || refusing.hits() != 1 || failing.hits() != 1 || second.hits() != 0 {
		t.Errorf("tried dead=%d refusing=%d failing=%d second=%d, want 1 1 1 0",
			deadHits.Load(), refusing.hits(), failing.hits(), second.hits())
	}
	// The dead server timed out: it is tried last for a while, so the
	// next query does not wait for it again.
	if got := f.byHealth(f.table.Load().upstreams); got[len(got)-1] != dead {
		t.Errorf("order after a timeout = %v, want %s last", got, dead)
	}
	r = ask(t, fwd, "udp", "www2.example.test", dns.TypeA, 0)
	if firstA(r) != "192.0.2.7" || deadHits.Load() != 1 {
		t.Errorf("second query: %v, dead hits %d; want an answer without asking the dead server", firstA(r), deadHits.Load())
	}

	// NXDOMAIN is an answer: no failover.
	nx := startDNS(t, "", serverBehaviour{})
	f.setTable(tableWith(nil, nx.addr, good.addr))
	before := good.hits()
	if r := ask(t, fwd, "udp", "nope.example.test", dns.TypeA, 0); r.Rcode != dns.RcodeNameError || good.hits() != before {
		t.Errorf("NXDOMAIN: rcode %s and the next server asked %d times; want NXDOMAIN from the first", dns.RcodeToString[r.Rcode], good.hits()-before)
	}

	// When every server refuses, the client gets the refusal, not a made-up answer.
	f.setTable(tableWith(nil, refusing.addr, failing.addr))
	if r := ask(t, fwd, "udp", "www.example.test", dns.TypeA, 0); r.Rcode != dns.RcodeServerFailure && r.Rcode != dns.RcodeRefused {
		t.Errorf("all servers failing: rcode %s, want SERVFAIL or REFUSED", dns.RcodeToString[r.Rcode])
	}
	// When none answers at all: SERVFAIL.
	f.setTable(tableWith(nil, dead))
	if r := ask(t, fwd, "udp", "www3.example.test", dns.TypeA, 0); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("no server answering: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
}

func TestForwarderRetriesTruncatedAnswersOverTCP(t *testing.T) {
	big := startDNS(t, "", serverBehaviour{truncate: true})
	_, fwd := startForwarder(t, tableWith(map[string]netip.AddrPort{"ky3.rjwrn.example.com": big.addr}, big.addr))

	// A client with a big EDNS buffer gets the whole answer over UDP.
	r := ask(t, fwd, "udp", "many.ky3.rjwrn.example.com", dns.TypeA, 4096)
	if r.Truncated || len(r.Answer) != 40 {
		t.Errorf("EDNS 4096 client: TC=%v with %d answers, want the 40 answers fetched over TCP", r.Truncated, len(r.Answer))
	}
	if big.tcpHits.Load() != 1 {
		t.Errorf("upstream TCP queries = %d, want 1 (the retry after TC)", big.tcpHits.Load())
	}
	// A 512-byte client gets what fits, flagged TC, and then asks over TCP.
	r = ask(t, fwd, "udp", "many.example.test", dns.TypeA, 0)
	if !r.Truncated || len(r.Answer) == 0 || len(r.Answer) == 40 {
		t.Errorf("512-byte client: TC=%v with %d answers, want part of the answer with TC", r.Truncated, len(r.Answer))
	}
	r.Compress = true // as it went on the wire
	if p, _ := r.Pack(); len(p) > 512 {
		t.Errorf("answer to a 512-byte client is %d bytes", len(p))
	}
	r = ask(t, fwd, "tcp", "many.example.test", dns.TypeA, 0)
	if r.Truncated || len(r.Answer) != 40 {
		t.Errorf("over TCP: TC=%v with %d answers, want all 40", r.Truncated, len(r.Answer))
	}
}

func TestForwarderKeepsPublicNamesWhenClusterServersAreDown(t *testing.T) {
	dead, _ := blackhole(t)
	orig := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("198.51.100.21")})
	_, fwd := startForwarder(t, tableWith(map[string]netip.AddrPort{
		"ky3.rjwrn.example.com": dead,
		"xym.rjwrn.example.com": dead,
	}, orig.addr))

	if r := ask(t, fwd, "udp", "www.example.test", dns.TypeA, 0); firstA(r) != "198.51.100.21" {
		t.Errorf("public name with every cluster server down: %v", r)
	}
	r := ask(t, fwd, "udp", "app.ky3.rjwrn.example.com", dns.TypeA, 0)
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("cluster name with its server down: rcode %s, want SERVFAIL (never the public answer)", dns.RcodeToString[r.Rcode])
	}
	if orig.hits() != 1 {
		t.Errorf("the original server was asked %d times, want 1: cluster names must not leak to it", orig.hits())
	}
}

func TestForwarderRefusesWhatIsNotAQuery(t *testing.T) {
	orig := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("198.51.100.21")})
	_, fwd := startForwarder(t, tableWith(nil, orig.addr))

	conn, err := net.Dial("udp", fwd.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	junk := [][]byte{
		{},
		{0x12},
		{0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f}, // name runs off the end
		[]byte("GET / HTTP/1.1\r\nHost: example\r\n\r\n"),
	}
	for _, j := range junk {
		if _, err := conn.Write(j); err != nil {
			t.Fatal(err)
		}
	}
	// An UPDATE is refused as not implemented.
	m := new(dns.Msg)
	m.SetUpdate("example.test.")
	c := &dns.Client{Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, fwd.String())
	if err != nil || r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("UPDATE: %v %v, want NOTIMP", r, err)
	}
	// And the forwarder still works, having sent none of that upstream.
	if r := ask(t, fwd, "udp", "www.example.test", dns.TypeA, 0); firstA(r) != "198.51.100.21" {
		t.Errorf("after junk: %v", r)
	}
	if orig.hits() != 1 {
		t.Errorf("upstream saw %d queries, want only the good one", orig.hits())
	}
}

func TestForwardTable(t *testing.T) {
	self := netip.MustParseAddrPort("127.0.80.53:53")
	tb := newForwardTable([]Route{
		{CID: "ky3", Server: netip.MustParseAddr("100.100.1.1"), Domains: []string{"ky3.rjwrn.example.com", "corp.example"}},
		{CID: "sub", Server: netip.MustParseAddr("100.100.3.1"), Domains: []string{"deep.corp.example"}},
	}, []netip.AddrPort{self, netip.MustParseAddrPort("10.77.0.53:53"), netip.MustParseAddrPort("10.77.0.53:53")}, 0, self)
	if len(tb.upstreams) != 1 || tb.upstreams[0].String() != "10.77.0.53:53" {
		t.Errorf("upstreams = %v: want the forwarder itself and duplicates left out", tb.upstreams)
	}
	for name, cid := range map[string]string{
		"a.deep.corp.example.": "sub", // the longest domain wins
		"x.corp.example.":      "ky3",
		"corp.example.":        "ky3",
		"example.":             "",
	} {
		z, ok := tb.route(name)
		if ok != (cid != "") || z.cid != cid {
			t.Errorf("route(%s) = %q, %v; want %q", name, z.cid, ok, cid)
		}
	}
	if tb := newForwardTable(nil, nil, 0, self); len(tb.upstreams) != 1 || tb.upstreams[0].String() != "127.0.0.1:53" {
		t.Errorf("no nameserver: %v, want 127.0.0.1:53 as glibc", tb.upstreams)
	}
}

func TestForwarderCloseHangsUpOnTCPClients(t *testing.T) {
	up := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("192.0.2.1")})
	f := newForwarder(slog.New(slog.DiscardHandler), time.Now, nil, tableWith(nil, up.addr))
	addr := freeLoopbackPort(t)
	if err := f.listen(addr); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// One query, so the connection is known to be served, then idle.
	m := new(dns.Msg)
	m.SetQuestion("www.example.test.", dns.TypeA)
	dc := &dns.Conn{Conn: c}
	if err := dc.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ReadMsg(); err != nil {
		t.Fatal(err)
	}
	f.close()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the TCP client is still connected after close")
	}
	if n := f.tcp.len(); n != 0 {
		t.Errorf("%d TCP connections left", n)
	}
}

// TestForwarderCountsQueries: each answer sent is counted, and each query
// sent on to a server once (whatever the retries); a refusal it makes
// itself is answered, not forwarded.
func TestForwarderCountsQueries(t *testing.T) {
	orig := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("198.51.100.21")})
	var c queryCounts
	f, addr := startCountingForwarder(t, tableWith(nil, orig.addr), &c)
	for _, network := range []string{"udp", "tcp", "udp"} {
		if r := ask(t, addr, network, "www.example.test", dns.TypeA, 0); firstA(r) != "198.51.100.21" {
			t.Fatalf("over %s: %v", network, r)
		}
	}
	f.setTable(&forwardTable{refuseOthers: true})
	if r := ask(t, addr, "udp", "www.example.test", dns.TypeA, 0); r.Rcode != dns.RcodeRefused {
		t.Fatalf("refusing table: %v", r)
	}
	// An answer is counted once its write returned, which may be just
	// after the client read it: wait for the count to settle.
	q := c.queries()
	for deadline := time.Now().Add(5 * time.Second); (q.Answered != 4 || q.Forwarded != 3) && time.Now().Before(deadline); q = c.queries() {
		time.Sleep(time.Millisecond)
	}
	if q.Answered != 4 || q.Forwarded != 3 {
		t.Errorf("counted %+v, want 4 answered, 3 forwarded", q)
	}
}
