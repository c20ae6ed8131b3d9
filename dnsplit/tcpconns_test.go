package dnsplit

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestTCPIdleConnectionsDoNotStarveQueries: 140 connections that send
// nothing, from one address, then from many, and a query over TCP is still
// answered at once, every time; the forwarder never holds more than its
// bounds. (Before: 130 idle connections made new TCP queries fail until
// the idle ones timed out, 10 s later.)
func TestTCPIdleConnectionsDoNotStarveQueries(t *testing.T) {
	up := startDNS(t, "", serverBehaviour{answer: netip.MustParseAddr("192.0.2.1")})
	f, fwd := startForwarder(t, tableWith(nil, up.addr))
	query := func(from string) {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", fwd.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second)) // a starved query waits 10 s
		m := new(dns.Msg)
		m.SetQuestion("www.example.test.", dns.TypeA)
		dc := &dns.Conn{Conn: c}
		if err := dc.WriteMsg(m); err != nil {
			t.Fatalf("query from %s: %v", from, err)
		}
		r, err := dc.ReadMsg()
		if err != nil || firstA(r) != "192.0.2.1" {
			t.Fatalf("query from %s while %d connections idle: %v, %v", from, f.tcp.len(), r, err)
		}
	}
	idle := func(from string, n int) {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		for range n {
			c, err := d.Dial("tcp", fwd.String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
		}
	}
	waitHeld := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); f.tcp.len() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("forwarder holds %d TCP connections, want %d", f.tcp.len(), want)
			}
		}
	}

	// One address opens 140: it keeps its own bound, the oldest going first.
	idle("127.0.0.2", 140)
	waitHeld(maxTCPPerSource)
	query("127.0.0.2")
	query("127.0.0.1")

	// Many addresses, 140 in all: the total bound holds, and queries from
	// anyone, those addresses included, are answered.
	for i := range 7 {
		idle(netip.AddrFrom4([4]byte{127, 0, 1, byte(10 + i)}).String(), 20)
	}
	waitHeld(maxTCPConns)
	query("127.0.0.1")
	query("127.0.1.10")
	query("127.0.0.3")
	if n := f.tcp.len(); n > maxTCPConns {
		t.Fatalf("forwarder holds %d TCP connections, over its bound %d", n, maxTCPConns)
	}
}

// A connection in the middle of a query is never taken for room; when all
// are, the newcomer is turned away.
func TestTCPConnsNeverEvictBusy(t *testing.T) {
	tc := newTCPConns(2, 2)
	src := netip.MustParseAddr("127.0.0.1")
	now := time.Unix(0, 0)
	pipe := func() net.Conn {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return a
	}
	x := tc.admit(pipe(), src, now)
	y := tc.admit(pipe(), src, now.Add(time.Second))
	tc.setBusy(x, true, now)
	tc.setBusy(y, true, now)
	if z := tc.admit(pipe(), src, now.Add(2*time.Second)); z != nil || tc.len() != 2 {
		t.Fatalf("admitted past two busy connections: %d held", tc.len())
	}
	tc.setBusy(y, false, now.Add(3*time.Second))
	z := tc.admit(pipe(), src, now.Add(4*time.Second))
	if z == nil || tc.len() != 2 {
		t.Fatal("an idle connection was not given up for a new one")
	}
	tc.mu.Lock()
	_, xHeld := tc.conns[x]
	_, yHeld := tc.conns[y]
	tc.mu.Unlock()
	if !xHeld || yHeld {
		t.Fatalf("evicted the wrong one: busy x held %v, idle y held %v", xHeld, yHeld)
	}
}
