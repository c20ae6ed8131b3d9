// Package connlimit caps the connections one remote address may hold open
// at once on a listener (control's API, a node's relay): past the cap a new
// connection from that address is closed as soon as it is accepted, before
// a byte of it is read, so one host cannot pin a server's goroutines and
// file descriptors with connections it never finishes.
//
// It counts by the TCP peer's address. Behind a load balancer every
// connection comes from the balancer: its addresses are exempt (Exempt),
// and the balancer must do its own per-client limiting. It is not a rate
// limit, nor a limit on requests within a connection.
package connlimit

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
)

// Config says what to cap.
type Config struct {
	// PerAddr is how many connections one address may hold; 0 or less:
	// no cap (the listener is returned as it is).
	PerAddr int
	// Exempt are the addresses not counted (load balancers, a loopback
	// ingress in front of a relay).
	Exempt func(netip.Addr) bool
	// Log hears when an address reaches the cap (once per time it does).
	Log *slog.Logger
	// What names the listener in the log ("control", "relay").
	What string
}

// Listen wraps ln with the cap of cfg.
func Listen(ln net.Listener, cfg Config) net.Listener {
	if cfg.PerAddr <= 0 {
		return ln
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &listener{Listener: ln, cfg: cfg, open: map[netip.Addr]int{}}
}

type listener struct {
	net.Listener
	cfg Config

	mu   sync.Mutex
	open map[netip.Addr]int
}

// Accept returns the next connection within the cap; those past it are
// closed here and never returned.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		a, ok := addrOf(c.RemoteAddr())
		if !ok || (l.cfg.Exempt != nil && l.cfg.Exempt(a)) {
			return c, nil
		}
		if h := holder(a); l.take(h) {
			return &conn{Conn: c, release: func() { l.release(h) }}, nil
		}
		_ = c.Close()
	}
}

func (l *listener) take(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.open[a]
	if n >= l.cfg.PerAddr {
		if n == l.cfg.PerAddr {
			// Said once each time the address reaches the cap.
			l.open[a] = n + 1
			l.cfg.Log.Warn(l.cfg.What+": an address holds its whole allowance of connections; further ones are closed at once",
				"addr", a.String(), "max", l.cfg.PerAddr)
		}
		return false
	}
	l.open[a] = n + 1
	return true
}

func (l *listener) release(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.open[a]
	if n > l.cfg.PerAddr {
		n = l.cfg.PerAddr // the mark of a warning said
	}
	if n <= 1 {
		delete(l.open, a)
		return
	}
	l.open[a] = n - 1
}

// Open is how many counted connections addr holds now (tests, metrics).
func Open(ln net.Listener, addr netip.Addr) int {
	l, ok := ln.(*listener)
	if !ok {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return min(l.open[holder(addr)], l.cfg.PerAddr)
}

// holder is whom an address stands for: an IPv4 address itself, an IPv6
// one its /64 (one host is given a whole /64, and could otherwise open
// PerAddr connections from each of its addresses).
func holder(a netip.Addr) netip.Addr {
	if a.Is4() {
		return a
	}
	p, err := a.Prefix(64)
	if err != nil {
		return a
	}
	return p.Addr()
}

func addrOf(a net.Addr) (netip.Addr, bool) {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, ok := netip.AddrFromSlice(ta.IP)
		return ip.Unmap(), ok
	}
	ap, err := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap(), err == nil
}

// conn gives its place back once, when closed.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

// NetConn is the connection it counts, as tls.Conn's NetConn: whoever
// takes the connection over (a hijacked push stream) reaches the TCP
// socket under it to set its buffers and look at it.
func (c *conn) NetConn() net.Conn { return c.Conn }

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
