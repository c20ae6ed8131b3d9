package vpnd

import (
	"context"
	"io"
	"log/slog"
	"runtime/debug"
	"slices"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 100},           // nothing measured: Go's default
		{3 * mib, 100},     // a small heap (one packet buffer per reader) keeps the default
		{6 * mib, 100},     // headroom equal to the heap: the default exactly
		{12 * mib, 50},     //
		{28 * mib, 21},     // Linux: wireguard-go's 384 buffers of 64 KiB and the daemon
		{600 * mib, 10},    // never so low that it collects all the time
		{1 << 40, 10},      //
		{6*mib + 1, 99},    // rounds down
		{mib / 1024, 100},  //
		{60 * mib / 7, 70}, //
	} {
		if got := gcPercent(c.live, 6*mib); got != c.want {
			t.Errorf("gcPercent(%d, 6 MiB) = %d, want %d", c.live, got, c.want)
		}
	}
}

func TestPaceGCKeepsEnvironment(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	prev := debug.SetGCPercent(77)
	defer debug.SetGCPercent(prev)
	_, restore := paceGC(log, "200")
	if got := gcPercentNow(); got != 77 {
		t.Errorf("GOGC in the environment: paceGC changed the GC percent to %d", got)
	}
	restore()

	_, restore = paceGC(log, "")
	if got := gcPercentNow(); got < 10 || got > 100 {
		t.Errorf("paced GC percent %d, want 10..100", got)
	}
	restore()
	if got := debug.SetGCPercent(prev); got != 77 {
		t.Errorf("restore left the GC percent at %d, want 77", got)
	}
}

func gcPercentNow() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// TestGCPacerFollowsTheHeap: the percent follows the live heap at rest as
// wireguard-go's buffers appear after the start's pacing, not every small
// breath of it; restore puts back what was there before the first.
func TestGCPacerFollowsTheHeap(t *testing.T) {
	const mib = 1 << 20
	cur := 100
	var sets []int
	p := &gcPacer{log: slog.New(slog.NewTextHandler(io.Discard, nil)), set: func(pct int) int {
		prev := cur
		cur = pct
		sets = append(sets, pct)
		return prev
	}}
	p.pace(3 * mib) // at start, before the batches: the default
	if len(sets) != 1 || cur != 100 {
		t.Fatalf("first pace: sets %v, percent %d, want [100] and 100", sets, cur)
	}
	p.pace(36 * mib) // the batches are there
	if want := gcPercent(36*mib, gcHeadroom); cur != want || cur >= 100 {
		t.Fatalf("36 MiB live: percent %d, want %d", cur, want)
	}
	p.pace(33 * mib) // within an eighth: left alone
	p.pace(40 * mib)
	if len(sets) != 2 {
		t.Fatalf("the heap breathing within an eighth re-paced it: sets %v", sets)
	}
	p.pace(60 * mib)
	if cur != 10 {
		t.Fatalf("60 MiB live: percent %d, want 10", cur)
	}
	p.restore()
	if cur != 100 {
		t.Fatalf("restore left %d, want the 100 from before the first pace", cur)
	}
	var none *gcPacer // GOGC set in the environment
	none.pace(36 * mib)
}

// TestWatchMemoryPacesAtRest: the watcher hands the pacer the readings at
// rest: a heap not grown trimAbove over its floor, or a quiet tunnel (the
// floor may have been taken before wireguard-go's batches existed, as in
// CI); none in a burst, whose packets in flight are not the heap to pace
// for.
func TestWatchMemoryPacesAtRest(t *testing.T) {
	type rd struct{ retained, tunnel uint64 }
	script := []rd{
		{5 * tMiB, 0},            // 0 the watcher's start, before the batches
		{40 * tMiB, 0},           // 1 the batches: above the floor, first look at the tunnel
		{40 * tMiB, 0},           // 2 quiet: at rest, paced
		{40 * tMiB, 0},           // 3 quiet again: paced, and trimmed (the floor is 40 MiB now)
		{150 * tMiB, 500 * tMiB}, // 4 a burst
		{150 * tMiB, 900 * tMiB}, // 5 still moving
		{150 * tMiB, 900 * tMiB}, // 6 quiet: paced
		{41 * tMiB, 900 * tMiB},  // 7 back near the floor: paced without a look at the tunnel
	}
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, paced, trims, trimming := 0, []int{}, 0, false
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchMemory(ctx, memWatch{
			log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
			tick: tick,
			heap: func() (uint64, uint64, bool) {
				if trimming { // the look after a trim: the same reading
					trimming = false
					return 0, script[n-1].retained, false
				}
				n++
				return 0, script[n-1].retained, false
			},
			tunnel: func() (uint64, error) { return script[n-1].tunnel, nil },
			trim:   func() { trims++; trimming = true },
			pace:   func() { paced = append(paced, n-1) },
		})
	}()
	for range len(script) - 1 {
		tick <- time.Now()
	}
	cancel()
	<-done
	if want := []int{2, 3, 6, 7}; !slices.Equal(paced, want) {
		t.Errorf("paced at readings %v, want %v (at rest only)", paced, want)
	}
	if trims != 1 {
		t.Errorf("%d trims, want 1 (after reading 3)", trims)
	}
}
