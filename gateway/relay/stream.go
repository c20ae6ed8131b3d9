package relay

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/runos/vpn/wghost"
)

// stream is one device's relay connection.
type stream struct {
	b      *Bind
	ep     *Endpoint
	device string
	ws     *wghost.Stream

	rx, tx atomic.Uint64 // datagram bytes, for the log

	once sync.Once
	done chan struct{}
	err  error
}

// newStream frames datagrams over c, recorded by t when it is set.
func newStream(b *Bind, ep *Endpoint, device string, c net.Conn, t *tap) *stream {
	if t != nil {
		c = &tappedConn{Conn: c, t: t}
	}
	return &stream{b: b, ep: ep, device: device, ws: wghost.NewStream(c), done: make(chan struct{})}
}

func (s *stream) send(bufs [][]byte) error {
	n, err := s.ws.Send(bufs)
	if err != nil {
		s.close(err)
		return err
	}
	s.tx.Add(uint64(n))
	return nil
}

// readLoop hands every datagram of the stream to wireguard-go until the
// stream ends; it returns why.
func (s *stream) readLoop() error {
	err := s.ws.Receive(s.b.Bind, s.ep, s.done, func(p []byte) { s.rx.Add(uint64(len(p))) })
	if errors.Is(err, wghost.ErrDone) {
		return s.err
	}
	return err
}

// close ends the stream once, recording the first reason.
func (s *stream) close(why error) {
	s.once.Do(func() {
		if why == nil {
			why = errors.New("closed")
		}
		s.err = why
		close(s.done)
		_ = s.ws.Close()
	})
}

// tap records what a stream carries, as the relay sees it (after TLS, so
// framed WireGuard datagrams): the end-to-end tests check it holds no
// plaintext. Nothing records unless the gateway is started with the hidden
// --relay-record flag.
type tap struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (t *tap) write(p []byte) {
	if t == nil {
		return
	}
	t.mu.Lock()
	_, _ = t.w.Write(p)
	t.mu.Unlock()
}

func (t *tap) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.w.Close()
}

// tappedConn is a stream's connection with its bytes recorded both ways.
type tappedConn struct {
	net.Conn
	t *tap
}

func (c *tappedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.t.write(p[:n])
	return n, err
}

func (c *tappedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err == nil {
		c.t.write(p[:n])
	}
	return n, err
}
