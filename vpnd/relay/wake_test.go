package relay

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/runos/vpn/internal/relaywire"
)

// nullBind is a conn.Bind that sends nowhere: the Bind's policy alone is
// under test.
type nullBind struct{}

func (nullBind) Open(uint16) ([]conn.ReceiveFunc, uint16, error) { return nil, 0, nil }
func (nullBind) Close() error                                    { return nil }
func (nullBind) SetMark(uint32) error                            { return nil }
func (nullBind) Send([][]byte, conn.Endpoint) error              { return nil }
func (nullBind) BatchSize() int                                  { return 1 }
func (nullBind) ParseEndpoint(s string) (conn.Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	return &conn.StdNetEndpoint{AddrPort: ap}, err
}

// syncClock is an injected clock the Bind's goroutines may read.
type syncClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *syncClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *syncClock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// TestBulkTransferDoesNotWakeTheLoopPerBatch (issue 24): data out and
// answers in, batch after batch, as in a bulk TCP transfer: each batch
// sent after an answer begins a new silence, and the Bind's loop must not
// be woken for each (a goroutine switch per batch: what kept the tunnel
// behind upstream wireguard-go). A silence that then lasts asks UDP
// first (a handshake) and, that unanswered, starts the race (the relay is
// dialed).
func TestBulkTransferDoesNotWakeTheLoopPerBatch(t *testing.T) {
	clk := &syncClock{now: t0}
	dialed := make(chan struct{}, 1)
	probed := make(chan struct{}, 1)
	b := New(Config{Inner: nullBind{}, Now: clk.Now, Log: slog.New(slog.DiscardHandler),
		Rehandshake: func(netip.AddrPort) {
			select {
			case probed <- struct{}{}:
			default:
			}
		},
		Dial: func(ctx context.Context, to Dest, ticket string) (Stream, error) {
			select {
			case dialed <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return nil, ctx.Err()
		},
		Ticket:  func(context.Context, string) (string, time.Time, error) { return "ticket", time.Time{}, nil },
		Captive: func(context.Context, string) (string, bool) { return "", false },
	})
	defer b.Stop()
	server := netip.MustParseAddrPort("192.0.2.1:51820")
	b.SetDests([]Dest{{CID: "ky3", Endpoint: server, RelayURL: "https://192.0.2.1/relay"}})
	ep := &conn.StdNetEndpoint{AddrPort: server}
	data := make([]byte, 1200)
	data[0] = relaywire.MsgData
	// Let the loop settle after SetDests' kick.
	waitFor(t, func() bool { return b.armed.Load() != 0 })
	before := b.loops.Load()
	// Paced, so that a loop woken by a batch runs before the next one (a
	// fast sender's kicks would all fold into one): 1 ms of the injected
	// clock and a yield of the real one per batch, 300 ms in all, within
	// one SilenceAfter.
	const batches = 300
	for range batches {
		clk.add(time.Millisecond)
		if err := b.Send([][]byte{data, data}, ep); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Microsecond)
		b.ObserveUDP([][]byte{data}, []int{len(data)}, []conn.Endpoint{ep}, 1)
	}
	if n := b.loops.Load() - before; n > 5 {
		t.Errorf("the loop ran %d times for %d batches; want it woken only when a wait is due before its timer", n, batches)
	}
	select {
	case <-dialed:
		t.Fatal("the relay was dialed while UDP answered every batch")
	default:
	}
	// Now nothing comes back: the silence started by this send is due
	// SilenceAfter later; it asks UDP for a handshake (which nothing
	// sends here), and after the handshake's head start the race dials
	// the relay.
	if err := b.Send([][]byte{data}, ep); err != nil {
		t.Fatal(err)
	}
	clk.add(DefaultTiming.SilenceAfter + time.Millisecond)
	select {
	case <-probed:
	case <-time.After(5 * time.Second):
		t.Fatal("a silence past SilenceAfter did not ask UDP for a handshake first")
	}
	select {
	case <-dialed:
		t.Fatal("the relay was dialed before the silence's handshake had its head start")
	default:
	}
	clk.add(DefaultTiming.RaceAfter)
	start := time.Now()
	select {
	case <-dialed:
		t.Logf("the race dialed the relay %v (real time) after the silence was due", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("a silence past SilenceAfter did not start the race")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
