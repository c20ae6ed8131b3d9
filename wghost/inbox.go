package wghost

import (
	"net"
	"sync"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/runos/vpn/internal/relaywire"
)

// inbox holds the datagrams read from relay streams until wireguard-go
// receives them through the Bind's relay receive function. A stream's
// reader hands over a batch at a time (every datagram its buffer already
// holds, as one message of the peer's brought them), so the receiving
// goroutine is woken once per batch rather than once per datagram.
type inbox struct {
	ch      chan *inboxBatch
	bufs    sync.Pool // *[]byte of MaxPayload bytes
	batches sync.Pool // *inboxBatch
}

type inboxed struct {
	buf *[]byte
	n   int
	ep  conn.Endpoint
}

type inboxBatch struct{ items []inboxed }

// maxInboxBatch is the most datagrams a reader hands over at once (half
// wireguard-go's batch on Linux); inboxLen bounds the batches waiting, so
// at most inboxLen × maxInboxBatch datagrams: a full inbox stops the
// streams' readers, and so TCP, rather than dropping.
const (
	maxInboxBatch = 64
	inboxLen      = 16
)

func newInbox() *inbox {
	in := &inbox{ch: make(chan *inboxBatch, inboxLen)}
	in.bufs.New = func() any { b := make([]byte, relaywire.MaxPayload); return &b }
	in.batches.New = func() any { return &inboxBatch{items: make([]inboxed, 0, maxInboxBatch)} }
	return in
}

// buffer returns a buffer to read one datagram into (MaxPayload bytes).
func (in *inbox) buffer() *[]byte { return in.bufs.Get().(*[]byte) }

// drop returns a buffer that was not put.
func (in *inbox) drop(b *[]byte) { in.bufs.Put(b) }

// batch returns an empty batch to fill.
func (in *inbox) batch() *inboxBatch { return in.batches.Get().(*inboxBatch) }

// release returns a batch and the buffers still in it.
func (in *inbox) release(bt *inboxBatch) {
	for i := range bt.items {
		if bt.items[i].buf != nil {
			in.bufs.Put(bt.items[i].buf)
		}
		bt.items[i] = inboxed{}
	}
	bt.items = bt.items[:0]
	in.batches.Put(bt)
}

// put queues a batch, waiting while the inbox is full; false (and the
// batch released) when done closes first.
func (in *inbox) put(bt *inboxBatch, done <-chan struct{}) bool {
	select {
	case in.ch <- bt:
		return true
	case <-done:
		in.release(bt)
		return false
	}
}

// receiveFunc receives queued datagrams, up to a batch of wireguard-go's
// at a time, until closed is closed; then it returns net.ErrClosed (as a
// Bind's receive functions must after Close). wireguard-go calls each
// receive function from one goroutine, so the rest of a batch larger than
// its buffers waits in the closure for the next call.
func (in *inbox) receiveFunc(closed <-chan struct{}) conn.ReceiveFunc {
	var cur *inboxBatch
	next := 0
	return func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		if cur == nil {
			select {
			case cur = <-in.ch:
				next = 0
			case <-closed:
				return 0, net.ErrClosed
			}
		}
		n := 0
		for {
			for ; next < len(cur.items) && n < len(bufs); next, n = next+1, n+1 {
				d := &cur.items[next]
				sizes[n] = copy(bufs[n], (*d.buf)[:d.n])
				eps[n] = d.ep
				in.bufs.Put(d.buf)
				d.buf = nil
			}
			if next == len(cur.items) {
				in.release(cur)
				cur = nil
			}
			if n == len(bufs) {
				return n, nil
			}
			select {
			case cur = <-in.ch:
				next = 0
			default:
				return n, nil
			}
		}
	}
}
