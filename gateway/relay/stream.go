package relay

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runos/vpn/internal/relaywire"
)

// writeTimeout bounds a write to a stream: a device that stops reading
// loses its stream rather than holding wireguard-go's sender.
const writeTimeout = 10 * time.Second

// stream is one device's relay connection.
type stream struct {
	b      *Bind
	ep     *Endpoint
	device string
	c      net.Conn
	tap    *tap // nil unless recording (tests)

	wmu  sync.Mutex
	wbuf []byte

	rx, tx atomic.Uint64 // datagram bytes, for the log

	once sync.Once
	done chan struct{}
	err  error
}

func newStream(b *Bind, ep *Endpoint, device string, c net.Conn, t *tap) *stream {
	return &stream{b: b, ep: ep, device: device, c: c, tap: t, done: make(chan struct{})}
}

// send frames bufs into one message.
func (s *stream) send(bufs [][]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b := s.wbuf[:0]
	var err error
	n := 0
	for _, p := range bufs {
		if b, err = relaywire.AppendFrame(b, relaywire.FrameData, p); err != nil {
			return err
		}
		n += len(p)
	}
	s.wbuf = b
	_ = s.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := s.c.Write(b); err != nil {
		s.close(err)
		return err
	}
	s.tx.Add(uint64(n))
	s.tap.write(b)
	return nil
}

// readLoop hands every datagram of the stream to wireguard-go until the
// stream ends; it returns why.
func (s *stream) readLoop() error {
	var src io.Reader = s.c
	if s.tap != nil {
		src = io.TeeReader(s.c, s.tap)
	}
	r := relaywire.NewReader(src)
	for {
		buf := s.b.in.Buffer()
		n, err := r.ReadData(*buf)
		if err != nil {
			s.b.in.Drop(buf)
			return err
		}
		s.rx.Add(uint64(n))
		if !s.b.in.Put(buf, n, s.ep, s.done) {
			return s.err
		}
	}
}

// close ends the stream once, recording the first reason.
func (s *stream) close(why error) {
	s.once.Do(func() {
		if why == nil {
			why = errors.New("closed")
		}
		s.err = why
		close(s.done)
		_ = s.c.Close()
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

func (t *tap) Write(p []byte) (int, error) {
	t.write(p)
	return len(p), nil
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
