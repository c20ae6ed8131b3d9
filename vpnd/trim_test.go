package vpnd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// tMiB is a mebibyte, for the readings below.
const tMiB = 1 << 20

// TestTrimDecision runs the watcher's decision over sequences of readings
// (one every trimEvery) and checks at which readings it trims, with the
// shortest wait (minQuiet = 2 quiet intervals; TestTrimQuietAdapts has the
// longer ones). Each sequence ends at its first trim or at a reading that
// could not yet be one.
func TestTrimDecision(t *testing.T) {
	if minQuiet != 2 {
		t.Fatalf("minQuiet is %d: rewrite these sequences", minQuiet)
	}
	const floor = 30 * tMiB
	big := uint64(floor + trimAbove) // just worth trimming
	type r = memReading
	tun := func(retained, tunnel uint64) r { return r{retained: retained, tunnel: tunnel, tunnelOK: true} }
	const no, yes = false, true
	for _, c := range []struct {
		name     string
		readings []memReading
		want     []bool
	}{
		{"at rest: heap at the floor, nothing to give back",
			[]r{{retained: floor}, {retained: floor + tMiB}, {retained: floor + 2*tMiB}, {retained: floor + 2*tMiB}, {retained: floor + 2*tMiB}},
			[]bool{no, no, no, no, no}},
		{"heap grew a little (connect/disconnect churn): below the line",
			[]r{{retained: floor + trimAbove - 1}, {retained: floor + trimAbove - 1}, {retained: floor + trimAbove - 1}, {retained: floor + trimAbove - 1}},
			[]bool{no, no, no, no}},
		{"a burst (the tunnel moves hundreds of MB), then quiet: trim after two quiet intervals",
			[]r{tun(150*tMiB, 0), tun(180*tMiB, 500*tMiB), tun(190*tMiB, 1100*tMiB),
				tun(190*tMiB, 1100*tMiB+4096), tun(190*tMiB, 1100*tMiB+8192)},
			[]bool{no, no, no, no, yes}},
		{"just worth trimming, and just quiet",
			[]r{tun(big, 7), tun(big, 7+quietBytes), tun(big, 7+2*quietBytes)},
			[]bool{no, no, yes}},
		{"one byte more than quiet is traffic, and starts the count again",
			[]r{tun(big, 7), tun(big, 7), tun(big, 8+quietBytes), tun(big, 8+quietBytes), tun(big, 8+quietBytes)},
			[]bool{no, no, no, no, yes}},
		{"a transfer within the wait keeps the buffers: no trim between them",
			[]r{tun(120*tMiB, 0), tun(120*tMiB, 400*tMiB), tun(120*tMiB, 400*tMiB),
				tun(130*tMiB, 800*tMiB), tun(130*tMiB, 800*tMiB), tun(130*tMiB, 800*tMiB)},
			[]bool{no, no, no, no, no, yes}},
		{"the first reading above the line has no interval to judge (a burst shorter than one)",
			[]r{{retained: floor}, tun(120*tMiB, 900*tMiB), tun(120*tMiB, 900*tMiB), tun(120*tMiB, 900*tMiB)},
			[]bool{no, no, no, yes}},
		{"the tunnel could not be read: no trim, whatever the heap",
			[]r{{retained: 200 * tMiB}, {retained: 200 * tMiB}, {retained: 200 * tMiB}, {retained: 200 * tMiB}, {retained: 200 * tMiB}},
			[]bool{no, no, no, no, no}},
		{"a peer left and took its counters: that interval is not judged, the next are",
			[]r{tun(120*tMiB, 900*tMiB), tun(120*tMiB, 300*tMiB), tun(120*tMiB, 300*tMiB), tun(120*tMiB, 300*tMiB)},
			[]bool{no, no, no, yes}},
		{"the heap went below the line while waiting (the scavenger did it): nothing to trim",
			[]r{tun(120*tMiB, 5), tun(120*tMiB, 5), {retained: floor}, tun(120*tMiB, 5), tun(120*tMiB, 5)},
			[]bool{no, no, no, no, no}},
		{"allocation does not matter: a quiet tunnel trims even while the daemon allocates",
			[]r{{retained: 120 * tMiB, allocs: 1 << 30, tunnel: 5, tunnelOK: true}, {retained: 120 * tMiB, allocs: 2 << 30, tunnel: 5, tunnelOK: true},
				{retained: 120 * tMiB, allocs: 3 << 30, tunnel: 5, tunnelOK: true}},
			[]bool{no, no, yes}},
		{"churn: garbage allocated and the heap a little above its floor, quiet: trim after two quiet intervals",
			[]r{{retained: floor + 3*tMiB, allocs: churnAllocs - 1}, {retained: floor + 3*tMiB, allocs: churnAllocs, tunnel: 5, tunnelOK: true},
				{retained: floor + 3*tMiB, allocs: churnAllocs + tMiB, tunnel: 5, tunnelOK: true}, {retained: floor + 3*tMiB, allocs: churnAllocs + tMiB, tunnel: 6, tunnelOK: true}},
			[]bool{no, no, no, yes}},
		{"churn that the scavenger already gave back (under churnAbove): nothing to trim",
			[]r{{retained: floor + churnAbove - 1, allocs: 2 * churnAllocs, tunnel: 5, tunnelOK: true}, {retained: floor + churnAbove - 1, allocs: 2 * churnAllocs, tunnel: 5, tunnelOK: true},
				{retained: floor + churnAbove - 1, allocs: 2 * churnAllocs, tunnel: 5, tunnelOK: true}, {retained: floor + churnAbove - 1, allocs: 2 * churnAllocs, tunnel: 5, tunnelOK: true}},
			[]bool{no, no, no, no}},
		{"the heap above its floor with little allocated (buffers kept warm by light traffic): no trim",
			[]r{{retained: floor + 6*tMiB, allocs: churnAllocs - 1, tunnel: 5, tunnelOK: true}, {retained: floor + 6*tMiB, allocs: churnAllocs - 1, tunnel: 5, tunnelOK: true},
				{retained: floor + 6*tMiB, allocs: churnAllocs - 1, tunnel: 5, tunnelOK: true}, {retained: floor + 6*tMiB, allocs: churnAllocs - 1, tunnel: 5, tunnelOK: true}},
			[]bool{no, no, no, no}},
		{"churn while traffic flows: no trim",
			[]r{{retained: floor + 3*tMiB, allocs: churnAllocs, tunnel: 0, tunnelOK: true}, {retained: floor + 3*tMiB, allocs: churnAllocs, tunnel: 2 * quietBytes, tunnelOK: true},
				{retained: floor + 3*tMiB, allocs: churnAllocs, tunnel: 4 * quietBytes, tunnelOK: true}, {retained: floor + 3*tMiB, allocs: churnAllocs, tunnel: 6 * quietBytes, tunnelOK: true}},
			[]bool{no, no, no, no}},
		{"a steady transfer never trims, however little it allocates",
			[]r{tun(120*tMiB, 0), tun(120*tMiB, 400*tMiB), tun(120*tMiB, 800*tMiB), tun(120*tMiB, 1200*tMiB), tun(120*tMiB, 1600*tMiB)},
			[]bool{no, no, no, no, no}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := trimState{floor: floor}
			for i, rd := range c.readings {
				var got bool
				s, got = s.next(rd)
				if got != c.want[i] {
					t.Errorf("reading %d (%+v): trim %v, want %v", i, rd, got, c.want[i])
				}
			}
		})
	}
}

// TestTrimFloor: after a trim the heap it left is the level at rest, so
// the watcher does not trim again until the heap grows trimAbove past it;
// and the floor follows the heap down.
func TestTrimFloor(t *testing.T) {
	s := trimState{floor: 30 * tMiB}
	quiet := memReading{retained: 150 * tMiB, tunnel: 9, tunnelOK: true}
	var trim bool
	for range minQuiet + 1 {
		s, trim = s.next(quiet)
	}
	if !trim {
		t.Fatal("no trim of a quiet, grown heap")
	}
	s = s.trimmed(40*tMiB, 33*tMiB, true)
	for i, ret := range []uint64{33 * tMiB, 34 * tMiB, 33*tMiB + trimAbove - 1, 33*tMiB + trimAbove - 1, 33*tMiB + trimAbove - 1, 33*tMiB + trimAbove - 1} {
		if s, trim = s.next(memReading{retained: ret, allocs: 40 * tMiB, tunnel: 9, tunnelOK: s.wantsTunnel(memReading{retained: ret})}); trim {
			t.Fatalf("reading %d: trimmed again at %d MiB without the heap growing %d MiB past the last trim", i, ret/tMiB, trimAbove/tMiB)
		}
	}
	// The scavenger took the heap lower on its own: growth counts from there.
	s, _ = s.next(memReading{retained: 28 * tMiB})
	if s.floor != 28*tMiB {
		t.Fatalf("floor %d MiB, want 28 (the lowest since the trim)", s.floor/tMiB)
	}
	if !s.wantsTunnel(memReading{retained: 28*tMiB + trimAbove}) {
		t.Error("growth from the lower level not counted")
	}
	// Churn counts its garbage from the trim's allocation count, not from zero.
	if s.wantsTunnel(memReading{retained: 28*tMiB + churnAbove, allocs: 40*tMiB + churnAllocs - 1}) {
		t.Error("churn counted from before the last trim")
	}
	if !s.wantsTunnel(memReading{retained: 28*tMiB + churnAbove, allocs: 40*tMiB + churnAllocs}) {
		t.Error("churn since the last trim not counted")
	}
}

// TestTrimQuietAdapts: a burst soon after a burst's trim makes the wait
// outlast the quiet it followed (at least doubling, up to maxQuiet), so
// transfers that follow each other keep their buffers after the first; a
// trim that no burst follows within maxQuiet halves it again; a churn trim
// changes nothing.
func TestTrimQuietAdapts(t *testing.T) {
	const floor = 30 * tMiB
	var tunnel uint64
	quiet := func() memReading { return memReading{retained: 150 * tMiB, tunnel: tunnel, tunnelOK: true} }
	burst := func() memReading {
		tunnel += 500 * tMiB
		return memReading{retained: 150 * tMiB, tunnel: tunnel, tunnelOK: true}
	}
	rest := memReading{retained: floor}
	s := trimState{floor: floor}
	// runBurst feeds a burst, then quiet readings until a trim (at most
	// limit); it returns the quiet intervals the trim waited for, 0 for none.
	runBurst := func(limit int) int {
		t.Helper()
		var trim bool
		s, _ = s.next(burst())
		s, _ = s.next(burst())
		for i := 1; i <= limit; i++ {
			if s, trim = s.next(quiet()); trim {
				s = s.trimmed(0, floor, true)
				return i
			}
		}
		return 0
	}
	idle := func(n int) {
		for range n {
			s, _ = s.next(rest)
		}
	}
	if got := runBurst(40); got != minQuiet {
		t.Fatalf("first burst trimmed after %d quiet intervals, want %d", got, minQuiet)
	}
	// The next transfer after 3 quiet intervals (the trim's 2 and one
	// more): the trim was early; the wait becomes 3+2.
	idle(1)
	if got := runBurst(40); got != 5 {
		t.Fatalf("after an early trim, 3 quiet intervals before the next burst: trimmed after %d, want 5", got)
	}
	// 11 quiet intervals (the trim's 5 and 6 more): the wait outlasts
	// them at once, 11+2.
	idle(6)
	if got := runBurst(40); got != 13 {
		t.Fatalf("after an early trim, 11 quiet intervals before the next burst: trimmed after %d, want 13", got)
	}
	// The same pattern again: quiet 11 intervals, under the wait of 13: no
	// trim between the transfers.
	for range 3 {
		s, _ = s.next(burst())
		for range 11 {
			var trim bool
			if s, trim = s.next(quiet()); trim {
				t.Fatal("trimmed between transfers that follow each other within the wait")
			}
		}
	}
	// A trim just before a burst, at maxQuiet: the wait stays at maxQuiet.
	s.need = maxQuiet
	if got := runBurst(40); got != maxQuiet {
		t.Fatalf("trimmed after %d, want maxQuiet %d", got, maxQuiet)
	}
	if got := runBurst(40); got != maxQuiet {
		t.Fatalf("the wait is %d, want it to stay at maxQuiet %d", got, maxQuiet)
	}
	idle(maxQuiet + 1) // nothing followed within maxQuiet: the trim was right
	if got := runBurst(40); got != maxQuiet/2 {
		t.Fatalf("after a trim no burst followed: trimmed after %d, want %d", got, maxQuiet/2)
	}
	idle(maxQuiet + 1)
	idle(maxQuiet + 1)
	if got := runBurst(40); got != maxQuiet/4 {
		t.Fatalf("halved twice: trimmed after %d, want %d", got, maxQuiet/4)
	}
	// A churn trim is not judged: the wait stays.
	need := s.needed()
	s = s.trimmed(0, floor, false)
	s, _ = s.next(burst())
	s, _ = s.next(burst())
	if s.needed() != need {
		t.Errorf("a burst after a churn trim changed the wait %d → %d", need, s.needed())
	}
}

// TestWatchMemory drives the watcher with injected ticks, readings and
// trim: it asks for the tunnel's counters only above the line, trims once
// after a burst and logs it, takes the heap after the trim as its new
// floor, does nothing while GOGC is off, and stops with its context.
func TestWatchMemory(t *testing.T) {
	type tickR struct {
		retained, tunnel uint64
		gcOff            bool
	}
	script := []tickR{
		{retained: 31 * tMiB},                      // 0 at rest: no tunnel read
		{retained: 150 * tMiB, tunnel: 0},          // 1 a burst: above the line
		{retained: 190 * tMiB, tunnel: 600 * tMiB}, // 2 still moving
		{retained: 190 * tMiB, tunnel: 600 * tMiB}, // 3 quiet
		{retained: 190 * tMiB, tunnel: 600 * tMiB}, // 4 quiet: trim (heap after: 33 MiB)
		{retained: 34 * tMiB},                      // 5 at rest after the trim
		{retained: 34 * tMiB},                      // 6
		{retained: 200 * tMiB, gcOff: true},        // 7 GOGC=off: nothing
		{retained: 200 * tMiB, gcOff: true},        // 8
		{retained: 200 * tMiB, gcOff: true},        // 9
		{retained: 200 * tMiB, gcOff: true},        // 10
	}
	// Every func below runs on the watcher's goroutine only; the test reads
	// what they recorded after the watcher has stopped.
	var (
		n           = -1 // the tick being handled; -1: the reading at start
		afterTrim   bool
		tunnelReads []int
		trims       []int
	)
	var logs bytes.Buffer
	w := memWatch{
		log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		heap: func() (uint64, uint64, bool) {
			if afterTrim {
				afterTrim = false
				return 0, 33 * tMiB, false
			}
			if n < 0 {
				n++
				return 0, 30 * tMiB, false
			}
			r := script[n]
			n++
			return 0, r.retained, r.gcOff
		},
		tunnel: func() (uint64, error) {
			tunnelReads = append(tunnelReads, n-1)
			return script[n-1].tunnel, nil
		},
		trim: func() { trims = append(trims, n-1); afterTrim = true },
	}
	tick := make(chan time.Time)
	w.tick = tick
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { watchMemory(ctx, w); close(done) }()
	for range script {
		tick <- time.Now() // taken only once the previous tick is handled
	}
	cancel() // the last tick is handled before the watcher sees this
	<-done

	if want := []int{1, 2, 3, 4}; !slices.Equal(tunnelReads, want) {
		t.Errorf("tunnel read at ticks %v, want %v (only above the line)", tunnelReads, want)
	}
	if want := []int{4}; !slices.Equal(trims, want) {
		t.Errorf("trimmed at ticks %v, want %v", trims, want)
	}
	if got := logs.String(); !strings.Contains(got, "memory trimmed") ||
		!strings.Contains(got, fmt.Sprintf("retainedBefore=%d retainedAfter=%d", 190*tMiB, 33*tMiB)) {
		t.Errorf("log: %s", got)
	}
}

// TestWatchMemoryTunnelUnreadable: without the tunnel's counters the
// watcher cannot tell a burst from its end, so it never trims, and it says
// so once.
func TestWatchMemoryTunnelUnreadable(t *testing.T) {
	var logs bytes.Buffer
	tick := make(chan time.Time)
	trims := 0
	w := memWatch{
		log:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		tick:   tick,
		tunnel: func() (uint64, error) { return 0, errors.New("no such device") },
		trim:   func() { trims++ },
	}
	first := true
	w.heap = func() (uint64, uint64, bool) {
		if first { // at start: at rest
			first = false
			return 0, 30 * tMiB, false
		}
		return 0, 200 * tMiB, false
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { watchMemory(ctx, w); close(done) }()
	for range 5 {
		tick <- time.Now()
	}
	cancel()
	<-done
	if trims != 0 {
		t.Errorf("%d trims without the tunnel's counters", trims)
	}
	if n := strings.Count(logs.String(), "cannot read the tunnel"); n != 1 {
		t.Errorf("logged the unreadable tunnel %d times, want once:\n%s", n, logs.String())
	}
}

// TestTrimHeapReader reads the real runtime: the retained heap covers what was
// just allocated and kept, and GOGC=off is seen.
func TestTrimHeapReader(t *testing.T) {
	r := newHeapReader()
	keep := make([][]byte, 0, 64)
	for range 64 {
		keep = append(keep, make([]byte, 64<<10))
	}
	allocs, retained, off := r.read()
	if retained < 4*tMiB || allocs < 4*tMiB {
		t.Errorf("retained %d, allocated %d bytes with 4 MiB held", retained, allocs)
	}
	if off {
		t.Error("GC reported off")
	}
	runtime.KeepAlive(keep)
	prev := debug.SetGCPercent(-1)
	_, _, off = r.read()
	debug.SetGCPercent(prev)
	if !off {
		t.Error("GOGC=off not seen")
	}
	if n := testing.AllocsPerRun(10, func() { r.read() }); n != 0 {
		t.Errorf("a reading allocates %v times, want 0 (the watcher reads at rest)", n)
	}
}

// TestTunnelMeter: the count only grows, whatever the peers do: a peer that
// leaves takes nothing back, one that comes back (or is re-created, its
// counters from zero) adds what it shows, and only growth is counted.
func TestTunnelMeter(t *testing.T) {
	a, b := wgtypes.Key{1}, wgtypes.Key{2}
	var m tunnelMeter
	for i, c := range []struct {
		peers map[wgtypes.Key]uint64
		want  uint64
	}{
		{map[wgtypes.Key]uint64{}, 0},
		{map[wgtypes.Key]uint64{a: 100}, 100},        // a new peer: all it shows
		{map[wgtypes.Key]uint64{a: 150, b: 40}, 190}, // growth of a, all of b
		{map[wgtypes.Key]uint64{a: 150}, 190},        // b left: nothing taken back
		{map[wgtypes.Key]uint64{a: 150, b: 7}, 197},  // b back from zero
		{map[wgtypes.Key]uint64{a: 30, b: 7}, 227},   // a re-created: from zero again
		{map[wgtypes.Key]uint64{a: 30, b: 7}, 227},   // quiet
		{nil, 227}, // no peers at all
		{map[wgtypes.Key]uint64{a: 1 << 40}, 1<<40 + 227},
	} {
		if got := m.add(c.peers); got != c.want {
			t.Fatalf("reading %d (%v): total %d, want %d", i, c.peers, got, c.want)
		}
	}
}
