package dnsplit

import (
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// testServer is a real miekg/dns server on loopback (UDP and TCP on one
// port) that answers A queries with addr and counts what it gets.
type testServer struct {
	addr    netip.AddrPort
	udpHits atomic.Int64
	tcpHits atomic.Int64
	refused atomic.Int64 // names outside only: another cluster's, asked here
}

type serverBehaviour struct {
	answer   netip.Addr            // A record for every name ("" → NXDOMAIN)
	rcode    int                   // if set, answer with this rcode instead
	truncate bool                  // over UDP: empty answer with TC set; over TCP: 40 A records
	only     string                // if set, REFUSED for names outside this suffix
	bySuffix map[string]netip.Addr // A record for names under a suffix, before answer
}

func (s *testServer) hits() int64 { return s.udpHits.Load() + s.tcpHits.Load() }

// startDNS serves b on 127.0.0.1 (or host) until the test ends.
func startDNS(t testing.TB, host string, b serverBehaviour) *testServer {
	t.Helper()
	if host == "" {
		host = "127.0.0.1"
	}
	var pc net.PacketConn
	var ln net.Listener
	for range 20 {
		var err error
		pc, err = net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("no free port for UDP and TCP at once")
	}
	return serveDNS(t, pc, ln, b)
}

// serveDNS serves b on sockets made elsewhere (in another namespace).
func serveDNS(t testing.TB, pc net.PacketConn, ln net.Listener, b serverBehaviour) *testServer {
	s := &testServer{addr: netip.MustParseAddrPort(pc.LocalAddr().String())}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		_, tcp := w.LocalAddr().(*net.TCPAddr)
		if tcp {
			s.tcpHits.Add(1)
		} else {
			s.udpHits.Add(1)
		}
		q := req.Question[0]
		r := new(dns.Msg)
		r.SetReply(req)
		name := strings.ToLower(q.Name)
		for suffix, a := range b.bySuffix {
			if dns.IsSubDomain(dns.Fqdn(suffix), name) && q.Qtype == dns.TypeA {
				r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
					A: a.AsSlice()})
			}
		}
		switch {
		case len(r.Answer) > 0:
		case b.only != "" && !dns.IsSubDomain(dns.Fqdn(b.only), name):
			s.refused.Add(1)
			r.Rcode = dns.RcodeRefused
		case b.rcode != 0:
			r.Rcode = b.rcode
		case b.truncate && !tcp:
			r.Truncated = true
		case b.truncate && tcp:
			for i := range 40 {
				r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
					A: net.IPv4(10, 9, 0, byte(i+1)).To4()})
			}
		case !b.answer.IsValid():
			r.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: b.answer.AsSlice()})
		}
		if opt := req.IsEdns0(); opt != nil {
			r.SetEdns0(opt.UDPSize(), false)
		}
		_ = w.WriteMsg(r)
	})
	us := &dns.Server{PacketConn: pc, Handler: h}
	ts := &dns.Server{Listener: ln, Handler: h}
	go func() { _ = us.ActivateAndServe() }()
	go func() { _ = ts.ActivateAndServe() }()
	t.Cleanup(func() { _ = us.Shutdown(); _ = ts.Shutdown() })
	return s
}

// blackhole is a UDP port that reads and never answers: a dead nameserver
// that still exists, so queries time out rather than fail fast.
func blackhole(t testing.TB) (netip.AddrPort, *atomic.Int64) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	go func() {
		buf := make([]byte, 65535)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			n.Add(1)
		}
	}()
	t.Cleanup(func() { pc.Close() })
	return netip.MustParseAddrPort(pc.LocalAddr().String()), &n
}

// ask sends one query to addr over udp or tcp.
func ask(t testing.TB, addr netip.AddrPort, network, name string, qtype uint16, edns uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	c := &dns.Client{Net: network, Timeout: 10 * time.Second}
	r, _, err := c.Exchange(m, addr.String())
	if err != nil {
		t.Fatalf("ask %s %s over %s: %v", addr, name, network, err)
	}
	return r
}

func firstA(r *dns.Msg) string {
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String()
		}
	}
	return ""
}

// freeLoopbackPort is a port free for both UDP and TCP on 127.0.0.1.
func freeLoopbackPort(t *testing.T) netip.AddrPort {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := netip.MustParseAddrPort(pc.LocalAddr().String())
		pc.Close()
		if ln, err := net.Listen("tcp", a.String()); err == nil {
			ln.Close()
			return a
		}
	}
	t.Fatal("no free port")
	return netip.AddrPort{}
}
