package wghost

import (
	"net"
	"sync"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/runos/vpn/internal/relaywire"
)

// inbox holds the datagrams read from relay streams until wireguard-go
// receives them through the Bind's relay receive function.
type inbox struct {
	ch   chan inboxed
	pool sync.Pool
}

type inboxed struct {
	buf *[]byte
	n   int
	ep  conn.Endpoint
}

// inboxLen bounds the datagrams waiting; a full inbox stops the streams'
// readers, and so TCP, rather than dropping.
const inboxLen = 1024

func newInbox() *inbox {
	in := &inbox{ch: make(chan inboxed, inboxLen)}
	in.pool.New = func() any { b := make([]byte, relaywire.MaxPayload); return &b }
	return in
}

// buffer returns a buffer to read one datagram into (MaxPayload bytes).
func (in *inbox) buffer() *[]byte { return in.pool.Get().(*[]byte) }

// drop returns a buffer that was not put.
func (in *inbox) drop(b *[]byte) { in.pool.Put(b) }

// put queues the first n bytes of buf, received from ep, waiting while the
// inbox is full; false (and buf dropped) when done closes first.
func (in *inbox) put(buf *[]byte, n int, ep conn.Endpoint, done <-chan struct{}) bool {
	select {
	case in.ch <- inboxed{buf, n, ep}:
		return true
	case <-done:
		in.pool.Put(buf)
		return false
	}
}

// receiveFunc receives queued datagrams, a batch at a time, until closed
// is closed; then it returns net.ErrClosed (as a Bind's receive functions
// must after Close).
func (in *inbox) receiveFunc(closed <-chan struct{}) conn.ReceiveFunc {
	return func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		var d inboxed
		select {
		case d = <-in.ch:
		case <-closed:
			return 0, net.ErrClosed
		}
		n := 0
		for {
			sizes[n] = copy(bufs[n], (*d.buf)[:d.n])
			eps[n] = d.ep
			in.pool.Put(d.buf)
			n++
			if n == len(bufs) {
				return n, nil
			}
			select {
			case d = <-in.ch:
			default:
				return n, nil
			}
		}
	}
}
