package relay

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// The WebSocket library writes a client's (masked) message through a
// 4 KiB buffer, flushing it each time it fills: a batch of WireGuard
// datagrams (up to ~200 KiB) became dozens of 4 KiB TLS records, each its
// own encryption and system call. A relay stream corks its TLS connection
// around each message instead, so TLS gets the whole batch in one write
// and makes full-sized records of it (profile in docs/performance.md).

// corkConn is a TLS connection whose writes can be held and sent as one.
type corkConn struct {
	net.Conn

	mu       sync.Mutex
	corked   bool
	buf      []byte
	deadline time.Time // for the held write: the stream's own deadline covers only the holding
}

// maxCorkKeep bounds the buffer a stream keeps between batches (a laptop
// pays for it in memory); larger batches allocate once.
const maxCorkKeep = 256 << 10

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork sends what was held, in one write.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.buf) == 0 {
		return nil
	}
	if !c.deadline.IsZero() {
		_ = c.Conn.SetWriteDeadline(c.deadline)
		defer func() { _ = c.Conn.SetWriteDeadline(time.Time{}) }()
	}
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > maxCorkKeep {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// corkingDialer dials the relay's TLS connection for the HTTP transport
// (HTTP/1.1 only: the WebSocket upgrade) and remembers it, so the stream
// made over it can cork it.
type corkingDialer struct {
	tls  *tls.Config
	addr func(string) string // where to dial for an address (the node's, for its relay's name)

	mu   sync.Mutex
	conn *corkConn
}

func (d *corkingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	cfg := d.tls.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host // the URL's name, not the address dialled
		}
	}
	if d.addr != nil {
		addr = d.addr(addr)
	}
	c, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cc := &corkConn{Conn: c}
	d.mu.Lock()
	d.conn = cc
	d.mu.Unlock()
	return cc, nil
}

// dialed is the connection dialled last (nil when the transport did not
// dial through d: a proxy).
func (d *corkingDialer) dialed() *corkConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conn
}

// corkedStream writes each message of a stream corked: one TLS write.
type corkedStream struct {
	Stream
	c *corkConn
}

func (s corkedStream) Write(p []byte) (int, error) {
	s.c.cork()
	n, err := s.Stream.Write(p)
	if uerr := s.c.uncork(); err == nil && uerr != nil {
		return 0, uerr
	}
	return n, err
}

// SetWriteDeadline bounds the next message's write (wghost.Stream sets it
// per batch): the holding, and the held write.
func (s corkedStream) SetWriteDeadline(t time.Time) error {
	s.c.mu.Lock()
	s.c.deadline = t
	s.c.mu.Unlock()
	if d, ok := s.Stream.(interface{ SetWriteDeadline(time.Time) error }); ok {
		return d.SetWriteDeadline(t)
	}
	return nil
}
