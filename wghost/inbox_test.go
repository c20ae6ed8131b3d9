package wghost

import (
	"net/netip"
	"testing"

	"golang.zx2c4.com/wireguard/conn"
)

// TestInboxHandsOverBatches: batches go over whole and in order; the rest
// of one larger than wireguard-go's buffers comes at the next call.
func TestInboxHandsOverBatches(t *testing.T) {
	in := newInbox()
	ep := &conn.StdNetEndpoint{AddrPort: netip.MustParseAddrPort("198.51.100.7:443")}
	seq := byte(0)
	queue := func(k int) {
		bt := in.batch()
		for range k {
			buf := in.buffer()
			(*buf)[0] = seq
			seq++
			bt.items = append(bt.items, inboxed{buf, 1, ep})
		}
		if !in.put(bt, nil) {
			t.Fatal("put refused")
		}
	}
	recv := in.receiveFunc(make(chan struct{}))
	want := byte(0)
	take := func(room, expect int) {
		t.Helper()
		bufs, sizes, eps := make([][]byte, room), make([]int, room), make([]conn.Endpoint, room)
		for i := range bufs {
			bufs[i] = make([]byte, 1500)
		}
		n, err := recv(bufs, sizes, eps)
		if err != nil || n != expect {
			t.Fatalf("received %d (%v), want %d", n, err, expect)
		}
		for i := range n {
			if sizes[i] != 1 || bufs[i][0] != want || eps[i] != ep {
				t.Fatalf("datagram %d: size %d seq %d, want seq %d", i, sizes[i], bufs[i][0], want)
			}
			want++
		}
	}
	queue(5)
	take(3, 3)
	take(3, 2)
	queue(2)
	queue(2)
	take(8, 4)
}
