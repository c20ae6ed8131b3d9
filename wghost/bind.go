package wghost

import (
	"sync"

	"golang.zx2c4.com/wireguard/conn"
)

// Bind is the conn.Bind both ends run wireguard-go on: UDP through an
// inner Bind (conn.NewDefaultBind(), wireguard-go's StdNetBind with its
// batched recvmmsg/sendmmsg and offloads) and, next to it, relay streams
// (Stream: WireGuard datagrams framed over a WebSocket). Where each batch
// goes is its Policy's to decide: the gateway's sends each device's answer
// back the way that device last came (UDP or its stream), the daemon's
// chooses UDP or the relay per peer from what each path answers.
//
// The Bind keeps wireguard-go's batching whole: BatchSize and the UDP
// receive functions are the inner Bind's, a batch is sent in one call to
// either path, and the relay's receive function hands on every datagram
// waiting, up to the batch size. Nothing is allocated per packet.
type Bind struct {
	udp    conn.Bind
	policy Policy
	in     *inbox

	mu     sync.Mutex
	closed chan struct{} // of the last Open; nil while closed
}

// Policy is what an end adds to UDP.
type Policy interface {
	// Route sends a batch wireguard-go wrote for ep: over UDP (udp.Send),
	// over a relay stream, or both. It must not keep bufs.
	Route(udp conn.Bind, bufs [][]byte, ep conn.Endpoint) error
}

// UDPObserver is a Policy that learns from what UDP brings (the daemon's:
// a handshake answered over UDP means UDP works). It is told of every batch
// before wireguard-go sees it, and must not keep bufs.
type UDPObserver interface {
	ObserveUDP(bufs [][]byte, sizes []int, eps []conn.Endpoint, n int)
}

var _ conn.Bind = (*Bind)(nil)

// NewBind returns a Bind over udp with policy p.
func NewBind(udp conn.Bind, p Policy) *Bind {
	return &Bind{udp: udp, policy: p, in: newInbox()}
}

// Open opens the UDP sockets and adds the relay's receive function.
func (b *Bind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	fns, actual, err := b.udp.Open(port)
	if err != nil {
		return nil, 0, err
	}
	closed := make(chan struct{})
	b.mu.Lock()
	b.closed = closed
	b.mu.Unlock()
	if o, ok := b.policy.(UDPObserver); ok {
		for i, fn := range fns {
			fns[i] = observe(fn, o)
		}
	}
	return append(fns, b.in.receiveFunc(closed)), actual, nil
}

func observe(fn conn.ReceiveFunc, o UDPObserver) conn.ReceiveFunc {
	return func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		n, err := fn(bufs, sizes, eps)
		if n > 0 {
			o.ObserveUDP(bufs, sizes, eps, n)
		}
		return n, err
	}
}

// Close closes the UDP sockets and ends the relay's receive function. The
// relay streams stay: wireguard-go closes and re-opens its Bind when the
// port changes or the network does (BindUpdate), and their datagrams wait
// for the next Open.
func (b *Bind) Close() error {
	b.mu.Lock()
	if b.closed != nil {
		close(b.closed)
		b.closed = nil
	}
	b.mu.Unlock()
	return b.udp.Close()
}

// IsOpen reports whether wireguard-go has the Bind open (its device is up).
func (b *Bind) IsOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed != nil
}

// Send hands the batch to the policy.
func (b *Bind) Send(bufs [][]byte, ep conn.Endpoint) error { return b.policy.Route(b.udp, bufs, ep) }

func (b *Bind) SetMark(mark uint32) error                     { return b.udp.SetMark(mark) }
func (b *Bind) ParseEndpoint(s string) (conn.Endpoint, error) { return b.udp.ParseEndpoint(s) }
func (b *Bind) BatchSize() int                                { return b.udp.BatchSize() }
