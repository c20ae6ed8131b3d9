package backoff

import (
	"context"
	"testing"
	"time"
)

func TestSequence(t *testing.T) {
	b := New(100*time.Millisecond, 10*time.Second)
	b.Rand = func(n int64) int64 { return n - 1 } // the top of each range
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000}
	for i, w := range want {
		if d := b.Next(); d != w*time.Millisecond {
			t.Fatalf("delay %d = %v, want %v", i, d, w*time.Millisecond)
		}
	}
	b.Reset()
	b.Rand = func(int64) int64 { return 0 } // the bottom: half the step
	if d := b.Next(); d != 50*time.Millisecond {
		t.Fatalf("after reset, lowest delay %v", d)
	}
}

func TestZeroValueAndJitterRange(t *testing.T) {
	var b Backoff
	for i := 0; i < 200; i++ {
		step := min(DefaultMin<<min(i, 10), DefaultMax)
		if d := b.Next(); d < step/2 || d > step {
			t.Fatalf("delay %d = %v, outside [%v, %v]", i, d, step/2, step)
		}
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	b := New(time.Hour, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx); err != context.Canceled {
		t.Fatalf("Wait = %v", err)
	}
	b = New(time.Millisecond, time.Millisecond)
	if err := b.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestFirstRetryJittered: the very first delay after a success is drawn
// too, so that the devices of a replica that died together do not all
// come back at the same instant (issue 25).
func TestFirstRetryJittered(t *testing.T) {
	seen := map[time.Duration]bool{}
	for _, r := range []int64{0, 1 << 20, 1 << 24} {
		b := New(100*time.Millisecond, 10*time.Second)
		b.Rand = func(n int64) int64 { return min(r, n-1) }
		seen[b.Next()] = true
	}
	if len(seen) != 3 {
		t.Fatalf("first delays %v: not drawn", seen)
	}
}
