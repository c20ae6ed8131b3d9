package wghost

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
)

// perPeer is a policy in the daemon's shape: each destination goes over
// UDP or over its relay stream, as decided for it.
type perPeer struct {
	mu      sync.Mutex
	relayed map[netip.AddrPort]*Stream
	seen    int // UDP datagrams observed
}

func (p *perPeer) Route(udp conn.Bind, bufs [][]byte, ep conn.Endpoint) error {
	p.mu.Lock()
	s := p.relayed[ep.(*conn.StdNetEndpoint).AddrPort]
	p.mu.Unlock()
	if s == nil {
		return udp.Send(bufs, ep)
	}
	_, err := s.Send(bufs)
	return err
}

func (p *perPeer) ObserveUDP(bufs [][]byte, sizes []int, eps []conn.Endpoint, n int) {
	p.mu.Lock()
	p.seen += n
	p.mu.Unlock()
}

// multiplex is a policy in the gateway's shape: an answer goes back the
// way its peer came, a stream endpoint over its stream, any other over UDP.
type multiplex struct{ streams map[*streamEP]*Stream }

type streamEP struct{ conn.StdNetEndpoint }

func (m *multiplex) Route(udp conn.Bind, bufs [][]byte, ep conn.Endpoint) error {
	if e, ok := ep.(*streamEP); ok {
		_, err := m.streams[e].Send(bufs)
		return err
	}
	return udp.Send(bufs, ep)
}

// receiver reads one receive function into a channel of batches.
func receiver(t *testing.T, fn conn.ReceiveFunc, batch int) <-chan [][]byte {
	out := make(chan [][]byte, 16)
	go func() {
		defer close(out)
		bufs := make([][]byte, batch)
		for i := range bufs {
			bufs[i] = make([]byte, 2048)
		}
		sizes, eps := make([]int, batch), make([]conn.Endpoint, batch)
		for {
			n, err := fn(bufs, sizes, eps)
			if err != nil {
				return
			}
			got := make([][]byte, n)
			for i := range n {
				got[i] = bytes.Clone(bufs[i][:sizes[i]])
			}
			out <- got
		}
	}()
	return out
}

func batchOf(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = bytes.Repeat([]byte{4, byte(i)}, 40) // a transport message's type first
	}
	return out
}

func wantBatch(t *testing.T, ch <-chan [][]byte, want [][]byte, what string) {
	t.Helper()
	var got [][]byte
	deadline := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case b, ok := <-ch:
			if !ok {
				t.Fatalf("%s: receive function ended after %d datagrams", what, len(got))
			}
			got = append(got, b...)
		case <-deadline:
			t.Fatalf("%s: %d of %d datagrams", what, len(got), len(want))
		}
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: datagram %d differs", what, i)
		}
	}
}

// TestPoliciesShareOneBind: a laptop's Bind (per-peer policy) and a node's
// (multiplexing policy), on real UDP sockets on loopback: a batch goes
// over UDP, then, the peer relayed, over a stream, and the node's answer
// goes back over the stream it came by; each reaches wireguard-go's
// receive functions whole.
func TestPoliciesShareOneBind(t *testing.T) {
	lp := &perPeer{relayed: map[netip.AddrPort]*Stream{}}
	laptop := NewBind(conn.NewStdNetBind(), lp)
	mp := &multiplex{streams: map[*streamEP]*Stream{}}
	node := NewBind(conn.NewStdNetBind(), mp)
	lfns, _, err := laptop.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer laptop.Close()
	nfns, nport, err := node.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if !node.IsOpen() {
		t.Fatal("an open Bind says it is closed")
	}
	var nodeIn []<-chan [][]byte
	for _, fn := range nfns {
		nodeIn = append(nodeIn, receiver(t, fn, node.BatchSize()))
	}
	nodeRelay, nodeUDP := nodeIn[len(nodeIn)-1], nodeIn[0] // IPv4 first, the relay last
	laptopRelay := receiver(t, lfns[len(lfns)-1], laptop.BatchSize())
	for _, fn := range lfns[:len(lfns)-1] {
		receiver(t, fn, laptop.BatchSize())
	}

	nodeEP := &conn.StdNetEndpoint{AddrPort: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), nport)}
	out := batchOf(3)
	if err := laptop.Send(out, nodeEP); err != nil {
		t.Fatal(err)
	}
	wantBatch(t, nodeUDP, out, "over UDP")

	// The laptop's path to the node becomes the relay.
	lc, nc := net.Pipe()
	ls, ns := NewStream(lc), NewStream(nc)
	defer ls.Close()
	defer ns.Close()
	ep := &streamEP{}
	mp.streams[ep] = ns
	done := make(chan struct{})
	defer close(done)
	go ns.Receive(node, ep, done, nil)
	var seen int
	var seenMu sync.Mutex
	go ls.Receive(laptop, nodeEP, done, func(p []byte) { seenMu.Lock(); seen += len(p); seenMu.Unlock() })
	lp.mu.Lock()
	lp.relayed[nodeEP.AddrPort] = ls
	lp.mu.Unlock()
	out = batchOf(5)
	if err := laptop.Send(out, nodeEP); err != nil {
		t.Fatal(err)
	}
	wantBatch(t, nodeRelay, out, "over the relay")
	back := batchOf(2)
	if err := node.Send(back, ep); err != nil {
		t.Fatal(err)
	}
	wantBatch(t, laptopRelay, back, "the answer over the relay")
	seenMu.Lock()
	if seen != 2*80 {
		t.Errorf("the stream's reader was told of %d bytes, want %d", seen, 2*80)
	}
	seenMu.Unlock()
}

// TestCloseKeepsStreams: Close ends the relay's receive function
// (net.ErrClosed, as wireguard-go expects of a closed Bind) but not the
// streams: what they carry meanwhile waits for the next Open.
func TestCloseKeepsStreams(t *testing.T) {
	b := NewBind(conn.NewStdNetBind(), &multiplex{})
	fns, _, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	relayFn := fns[len(fns)-1]
	ended := make(chan error, 1)
	go func() {
		bufs, sizes, eps := [][]byte{make([]byte, 100)}, []int{0}, []conn.Endpoint{nil}
		_, err := relayFn(bufs, sizes, eps)
		ended <- err
	}()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("relay receive after Close: %v", err)
	}
	if b.IsOpen() {
		t.Fatal("a closed Bind says it is open")
	}
	a, c := net.Pipe()
	defer a.Close()
	done := make(chan struct{})
	defer close(done)
	go NewStream(c).Receive(b, &streamEP{}, done, nil)
	out := batchOf(4)
	if _, err := NewStream(a).Send(out); err != nil {
		t.Fatal(err)
	}
	fns, _, err = b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wantBatch(t, receiver(t, fns[len(fns)-1], 8), out, "after re-Open")
}

// TestObserverSeesUDP: a policy that observes is told of every UDP batch,
// one that does not gets wireguard-go's receive functions as they are.
func TestObserverSeesUDP(t *testing.T) {
	lp := &perPeer{relayed: map[netip.AddrPort]*Stream{}}
	b := NewBind(conn.NewStdNetBind(), lp)
	fns, port, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	in := receiver(t, fns[0], b.BatchSize())
	to := &conn.StdNetEndpoint{AddrPort: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)}
	out := batchOf(3)
	if err := b.Send(out, to); err != nil {
		t.Fatal(err)
	}
	wantBatch(t, in, out, "to itself")
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if lp.seen != 3 {
		t.Errorf("observer saw %d datagrams, want 3", lp.seen)
	}
}

// nullUDP is a Bind that sends nowhere, for counting allocations.
type nullUDP struct{ conn.Bind }

func (nullUDP) Send([][]byte, conn.Endpoint) error { return nil }

type discard struct{}

func (discard) Read([]byte) (int, error)    { return 0, io.EOF }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

// TestNoAllocationPerBatch: neither path allocates to send a batch (the
// data path issue 24 measures).
func TestNoAllocationPerBatch(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	lp := &perPeer{relayed: map[netip.AddrPort]*Stream{}}
	b := NewBind(nullUDP{conn.NewStdNetBind()}, lp)
	ep := &conn.StdNetEndpoint{AddrPort: netip.MustParseAddrPort("10.77.0.21:32768")}
	bufs := batchOf(128)
	if n := testing.AllocsPerRun(100, func() { _ = b.Send(bufs, ep) }); n != 0 {
		t.Errorf("UDP: %.1f allocations per batch", n)
	}
	lp.relayed[ep.AddrPort] = NewStream(discard{})
	if n := testing.AllocsPerRun(100, func() { _ = b.Send(bufs, ep) }); n != 0 {
		t.Errorf("relay: %.1f allocations per batch", n)
	}
}
