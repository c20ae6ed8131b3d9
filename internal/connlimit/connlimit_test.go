package connlimit

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestCapPerAddress: past the cap a connection is closed before anything
// is read from it, the ones within it stay, and closing one makes room.
func TestCapPerAddress(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listen(raw, Config{PerAddr: 3, What: "test"})
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	lo := netip.MustParseAddr("127.0.0.1")
	var served []net.Conn // the server's ends
	for i := range 3 {
		dial(t, raw.Addr())
		served = append(served, <-accepted)
		if n := Open(ln, lo); n != i+1 {
			t.Fatalf("open after %d dials: %d", i+1, n)
		}
	}
	for range 4 {
		if !closedByServer(t, dial(t, raw.Addr())) {
			t.Fatal("a connection past the cap was kept")
		}
		if n := Open(ln, lo); n != 3 {
			t.Fatalf("open: %d, want the cap, 3", n)
		}
	}
	select {
	case <-accepted:
		t.Fatal("a connection past the cap was handed to the server")
	default:
	}
	// The server closes one: room for one more.
	served[0].Close()
	if n := Open(ln, lo); n != 2 {
		t.Fatalf("open after one closed: %d, want 2", n)
	}
	dial(t, raw.Addr())
	(<-accepted).Close()
}

// TestExempt: an exempt address (a balancer) is never counted.
func TestExempt(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listen(raw, Config{PerAddr: 1, Exempt: func(a netip.Addr) bool { return a.IsLoopback() }})
	defer ln.Close()
	for range 3 {
		dial(t, raw.Addr())
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
}

func dial(t *testing.T, a net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", a.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer waits for the server's end to close (EOF or a reset).
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err == io.EOF || err != nil
}

// An IPv6 host holds a /64: its addresses share one allowance, while
// another /64 and IPv4 addresses each have their own.
func TestHolderOfAnAddress(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:2::"},
		{"2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::"},
		{"2001:db8:1:3::9", "2001:db8:1:3::"},
		{"198.51.100.7", "198.51.100.7"},
	} {
		if got := holder(netip.MustParseAddr(c.a)); got != netip.MustParseAddr(c.b) {
			t.Errorf("holder(%s) = %s, want %s", c.a, got, c.b)
		}
	}
}
