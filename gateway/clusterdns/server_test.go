package clusterdns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/runos/vpn/internal/testenv"
)

var loopback = netip.MustParseAddr("127.0.0.1")

func startServer(t testing.TB, doms []string) *Server {
	t.Helper()
	s := NewServer(0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := s.Set(mustNewZone(t, loopback, doms)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func exchange(t *testing.T, net, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: net, Timeout: 10 * time.Second}
	r, _, err := c.Exchange(query(name, qtype), addr)
	if err != nil {
		t.Fatalf("%s query %s: %v", net, name, err)
	}
	return r
}

func TestServerUDPAndTCP(t *testing.T) {
	s := startServer(t, domains)
	addr := s.Addr().String()
	for _, n := range []string{"udp", "tcp"} {
		r := exchange(t, n, addr, "App.KY3.rjwrn.example.com.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "127.0.0.1" {
			t.Fatalf("%s: %v", n, r)
		}
		if r := exchange(t, n, addr, "www.example.test.", dns.TypeA); r.Rcode != dns.RcodeRefused {
			t.Fatalf("%s outside: %v", n, r)
		}
	}
}

// New domains take effect without rebinding the listeners.
func TestServerDomainsChangeWithoutRestart(t *testing.T) {
	s := startServer(t, []string{"ky3.rjwrn.example.com"})
	before := s.Addr()
	conn, err := dns.Dial("tcp", before.String()) // held open across the change
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := s.Set(mustNewZone(t, loopback, []string{"xym.rjwrn.example.com"})); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != before {
		t.Fatalf("listeners moved from %v to %v", before, s.Addr())
	}
	if err := conn.WriteMsg(query("app.xym.rjwrn.example.com.", dns.TypeA)); err != nil {
		t.Fatal(err)
	}
	r, err := conn.ReadMsg()
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("new domain over the old connection: %v %v", r, err)
	}
	if r := exchange(t, "udp", before.String(), "app.ky3.rjwrn.example.com.", dns.TypeA); r.Rcode != dns.RcodeRefused {
		t.Fatalf("old domain still answered: %v", r)
	}
}

func mustNewZone(t testing.TB, addr netip.Addr, doms []string) *Zone {
	t.Helper()
	z, err := NewZone(addr, doms)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// Moving to another address rebinds; the old address stops answering.
func TestServerAddressChangeRebinds(t *testing.T) {
	s := startServer(t, domains)
	old := s.Addr()
	other := netip.MustParseAddr("127.0.0.2")
	if err := s.Set(mustNewZone(t, other, domains)); errors.Is(err, syscall.EADDRNOTAVAIL) {
		testenv.Skip(t, fmt.Sprintf("needs 127.0.0.2 (all of 127.0.0.0/8 is local on Linux): %v", err))
	} else if err != nil {
		t.Fatal(err)
	}
	if s.Addr().Addr() != other {
		t.Fatalf("listening on %v", s.Addr())
	}
	r := exchange(t, "udp", s.Addr().String(), "app.ky3.rjwrn.example.com.", dns.TypeA)
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "127.0.0.2" {
		t.Fatalf("answer after the move: %v", r)
	}
	if c, err := net.Dial("tcp", old.String()); err == nil {
		c.Close()
		t.Fatal("old address still listening")
	}
}

// Garbage gets FORMERR or nothing, never a crash, and the server keeps
// answering.
func TestServerMalformedPackets(t *testing.T) {
	s := startServer(t, domains)
	c, err := net.Dial("udp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	valid, _ := query("app.ky3.rjwrn.example.com.", dns.TypeA).Pack()
	rng := rand.New(rand.NewPCG(1, 2))
	var packets [][]byte
	packets = append(packets, nil, []byte{0}, valid[:5], valid[:12], valid[:len(valid)-3])
	bad := append([]byte(nil), valid...)
	binary.BigEndian.PutUint16(bad[4:], 40) // 40 questions announced, one present
	packets = append(packets, bad)
	for range 200 {
		p := make([]byte, rng.IntN(300))
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		if len(p) > 2 {
			p[2] &^= 0x80 // a query, so the server looks at it
		}
		packets = append(packets, p)
	}
	for _, p := range packets {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 65535)
	for {
		n, err := c.Read(buf)
		if err != nil {
			break // deadline: everything that was going to answer has
		}
		var m dns.Msg
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatalf("server sent an unparsable reply: %v", err)
		}
		switch m.Rcode {
		case dns.RcodeFormatError, dns.RcodeNotImplemented, dns.RcodeRefused, dns.RcodeSuccess, dns.RcodeBadVers:
		default:
			t.Fatalf("unexpected rcode %s for garbage", dns.RcodeToString[m.Rcode])
		}
		if m.Rcode == dns.RcodeSuccess {
			for _, rr := range m.Answer {
				if a, ok := rr.(*dns.A); !ok || a.A.String() != "127.0.0.1" {
					t.Fatalf("garbage got an answer that is not the server address: %v", rr)
				}
			}
		}
	}
	if r := exchange(t, "udp", s.Addr().String(), "app.ky3.rjwrn.example.com.", dns.TypeA); len(r.Answer) != 1 {
		t.Fatalf("server stopped answering after garbage: %v", r)
	}
}

func TestServerClose(t *testing.T) {
	s := NewServer(0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := s.Set(mustNewZone(t, loopback, domains)); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().String()
	s.Close()
	if s.Addr().IsValid() {
		t.Fatal("address still set after Close")
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("TCP listener still open after Close")
	}
}
