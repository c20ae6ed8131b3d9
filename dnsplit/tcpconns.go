package dnsplit

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// tcpConns bounds the forwarder's TCP clients, per source address and in
// all, without ever refusing a new one while an idle one could go: a
// client that opens connections and sends nothing (130 of them, from one
// address or many) must not starve the others. When a bound is reached the
// connection idle the longest (of that source first) is closed, as RFC
// 7766 §6.2.3 lets a server do; a connection in the middle of a query is
// never taken, and only when every connection is busy is the new one
// turned away.
type tcpConns struct {
	max, perSource int

	mu     sync.Mutex
	conns  map[*tcpConn]struct{}
	closed bool
}

// tcpConn is one client connection and whether it waits for a query.
type tcpConn struct {
	c         net.Conn
	src       netip.Addr
	busy      bool      // a query is being answered
	idleSince time.Time // since its last answer (or its accept)
}

func newTCPConns(max, perSource int) *tcpConns {
	return &tcpConns{max: max, perSource: perSource, conns: map[*tcpConn]struct{}{}}
}

// admit registers c from src, first closing the oldest idle connection of
// src when src is at its bound, then the oldest idle one of anyone when
// the total is. It returns nil (and closes c) when no room can be made.
func (t *tcpConns) admit(c net.Conn, src netip.Addr, now time.Time) *tcpConn {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		c.Close()
		return nil
	}
	var evict []net.Conn
	if t.count(src) >= t.perSource {
		if v := t.oldestIdle(src, true); v != nil {
			evict = append(evict, t.take(v))
		}
	}
	if len(t.conns) >= t.max {
		if v := t.oldestIdle(netip.Addr{}, false); v != nil {
			evict = append(evict, t.take(v))
		}
	}
	var tc *tcpConn
	if len(t.conns) < t.max && t.count(src) < t.perSource {
		tc = &tcpConn{c: c, src: src, idleSince: now}
		t.conns[tc] = struct{}{}
	}
	t.mu.Unlock()
	for _, v := range evict {
		v.Close() // its reader fails and it goes (remove is then a no-op)
	}
	if tc == nil {
		c.Close()
	}
	return tc
}

func (t *tcpConns) count(src netip.Addr) int {
	n := 0
	for tc := range t.conns {
		if tc.src == src {
			n++
		}
	}
	return n
}

// oldestIdle is the connection idle the longest, of src only when sameSrc.
func (t *tcpConns) oldestIdle(src netip.Addr, sameSrc bool) *tcpConn {
	var old *tcpConn
	for tc := range t.conns {
		if tc.busy || sameSrc && tc.src != src {
			continue
		}
		if old == nil || tc.idleSince.Before(old.idleSince) {
			old = tc
		}
	}
	return old
}

func (t *tcpConns) take(tc *tcpConn) net.Conn {
	delete(t.conns, tc)
	return tc.c
}

// setBusy marks tc as answering a query (busy) or waiting for the next.
func (t *tcpConns) setBusy(tc *tcpConn, busy bool, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tc.busy = busy
	if !busy {
		tc.idleSince = now
	}
}

// remove forgets tc (if admit has not already closed it for room).
func (t *tcpConns) remove(tc *tcpConn) {
	t.mu.Lock()
	delete(t.conns, tc)
	t.mu.Unlock()
}

// closeAll hangs up on every client; later admits are refused.
func (t *tcpConns) closeAll() {
	t.mu.Lock()
	t.closed = true
	var cs []net.Conn
	for tc := range t.conns {
		cs = append(cs, tc.c)
	}
	t.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// len is how many connections are held (for tests).
func (t *tcpConns) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}
