package wghost

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/runos/vpn/internal/relaywire"
)

// writeTimeout bounds a write to a stream: a peer that stops reading loses
// its stream rather than holding wireguard-go's sender.
const writeTimeout = 10 * time.Second

// Stream is one relay connection as either end holds it: WireGuard
// datagrams framed by internal/relaywire both ways, a whole batch in one
// write (one WebSocket message, one TLS record where it fits).
type Stream struct {
	c io.ReadWriteCloser

	wmu  sync.Mutex // one writer at a time
	wbuf []byte     // reused for every batch
}

// NewStream frames datagrams over c.
func NewStream(c io.ReadWriteCloser) *Stream { return &Stream{c: c} }

// Send writes bufs as one message and returns the datagram bytes sent. A
// failed write closes the stream, so its reader ends too.
func (s *Stream) Send(bufs [][]byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	b := s.wbuf[:0]
	var err error
	n := 0
	for _, p := range bufs {
		if b, err = relaywire.AppendFrame(b, relaywire.FrameData, p); err != nil {
			return 0, err
		}
		n += len(p)
	}
	s.wbuf = b
	if dl, ok := s.c.(interface{ SetWriteDeadline(time.Time) error }); ok {
		_ = dl.SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	if _, err := s.c.Write(b); err != nil {
		_ = s.c.Close()
		return 0, err
	}
	return n, nil
}

// ErrDone is Receive's answer when done closed first.
var ErrDone = errors.New("relay stream done")

// Receive hands every datagram read from the stream to b's wireguard-go as
// coming from ep, until the stream ends (its error) or done closes
// (ErrDone). seen, when set, is told of each datagram first; it must not
// keep p. The datagrams already read into the reader's buffer go over
// together (a batch the peer wrote in one message).
func (s *Stream) Receive(b *Bind, ep conn.Endpoint, done <-chan struct{}, seen func(p []byte)) error {
	r := relaywire.NewReader(s.c)
	for {
		bt := b.in.batch()
		err := s.readBatch(r, b.in, bt, ep, seen)
		if len(bt.items) == 0 {
			b.in.release(bt)
		} else if !b.in.put(bt, done) {
			return ErrDone
		}
		if err != nil {
			return err
		}
	}
}

// readBatch reads one datagram, waiting for it, and then those the
// reader holds already, up to maxInboxBatch.
func (s *Stream) readBatch(r *relaywire.Reader, in *inbox, bt *inboxBatch, ep conn.Endpoint, seen func(p []byte)) error {
	for {
		buf := in.buffer()
		n, err := r.ReadData(*buf)
		if err != nil {
			in.drop(buf)
			return err
		}
		if seen != nil {
			seen((*buf)[:n])
		}
		bt.items = append(bt.items, inboxed{buf, n, ep})
		if len(bt.items) == maxInboxBatch || !r.Buffered() {
			return nil
		}
	}
}

// Close closes the connection.
func (s *Stream) Close() error {
	err := s.c.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("close relay stream: %w", err)
	}
	return nil
}
