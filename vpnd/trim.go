package vpnd

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Why the daemon gives memory back after a burst of traffic.
//
// Bulk traffic through the tunnel (iperf3 at ~2 Gbit/s here) puts hundreds
// of wireguard-go's 64 KiB packet buffers in flight at once: its queues
// hold 1,024 packets per direction and its pools have no cap
// (PreallocatedBuffersPerPool = 0 but on Android and iOS). On Linux each
// buffer is filled by a GSO or GRO segment, so its pages become resident: 116–197 MiB of RSS after a
// few seconds of it. When the burst ends the buffers go back to sync.Pools,
// which only drop them over two collections, and an idle daemon allocates
// so little that the GC then runs only by the runtime's two-minute forced
// collection; the scavenger then returns the freed pages at its own slow
// pace. Measured: 116 MiB for six minutes after one 3 s transfer, then
// 23 MiB.
//
// So the daemon watches its heap every trimEvery and, once the heap it
// holds in RAM has grown trimAbove past its level at rest and the tunnel
// has been quiet for a few intervals in a row, collects twice and
// returns the free pages to the OS at once (trimMemory). It then takes the
// heap it is left with as the level at rest, so it does not do it again
// until the heap grows again.
//
// "Quiet" is the tunnel's own byte counters (every peer, both ways), not
// the daemon's allocation: once a transfer is under way wireguard-go takes
// its buffers from warm pools, so what the daemon allocates follows the
// pools' misses, not the traffic (measured in the lab: under 11 MB in the
// last 2 s of a transfer that moved ~400 MB in them, against ~25 KB at
// rest). Collecting and emptying the pools in the middle of a transfer
// would make the next packets allocate and fault their pages in again: the
// cost to throughput that ruled out a tight GOMEMLIMIT (gc.go). The
// counters say directly whether packets still flow. A read of them takes
// the engine's lock and makes a map of the peers, so the daemon asks for
// them only while the heap is above the line; at rest it reads only
// runtime/metrics, which allocates nothing.
//
// How long to wait: a trim is not free for the next burst. It starts with
// empty pools and released pages, like a fresh daemon's first transfer,
// and faults its ~100 MB in again: a page fault costs ~12 µs on this
// project's test machines (virtual machines; docs/performance.md), ~300 ms
// for 100 MiB, and the next transfer's first second runs ~30 % slower
// than one that finds the buffers warm (BenchmarkLabBursts). So the quiet
// wanted before a trim adapts (next, trimmed): it starts at minQuiet
// intervals, which gives the memory back 2-3 s after an isolated burst;
// when a burst comes within maxQuiet intervals of quiet after a burst's
// trim (transfers one after another: a script, a benchmark's rounds, a
// person retrying), that trim was early, and the wait grows to outlast the
// quiet that burst followed (at least doubling, up to maxQuiet); a trim
// that maxQuiet intervals follow with no burst halves it again. A pattern
// of transfers up to 16 s apart then pays one cold start, not one per
// transfer.
//
// Connects and disconnects leave a smaller residue that the same trim
// clears: each allocates ~0.5 MB of short-lived garbage (device reads,
// status JSON, control requests) that lands on fresh pages, and the
// scavenger does not return them because it judges the heap by its size,
// which counts wireguard-go's ~25 MB of batch buffers whose pages were
// never touched: the heap looks small to it while RSS grows (27–31 MiB
// after 400 connects and disconnects in the lab, against 19 MiB connected
// at rest). So a tunnel quiet for as long as after a burst also trims when
// the daemon has allocated churnAllocs since the last trim and holds
// churnAbove more than then. Light traffic below quietBytes refills the
// pools with a few buffers at most, under churnAbove, so it does not trim
// over and over.
//
// Nothing here changes the GC's pacing (gc.go) or a memory limit: an
// operator's GOGC or GOMEMLIMIT stays in force, and trimming after a burst
// only does early what the GC and the scavenger would do in minutes. With
// GOGC=off the operator asked for no collections, and the daemon makes none.
const (
	trimEvery = time.Second
	// minQuiet and maxQuiet bound how many trimEvery intervals in a row
	// the tunnel must be quiet before a trim (see "How long to wait"):
	// the memory goes back 2-3 s after an isolated burst, at most 16-17 s
	// after bursts that follow each other.
	minQuiet = 2
	maxQuiet = 16
	// trimAbove is how far the retained heap must grow over its level at
	// rest before a trim is worth its collections: more than the garbage
	// the GC is paced to allow at rest (gcHeadroom), so ordinary
	// connect/disconnect churn rarely triggers one, far less than what a
	// burst leaves (65–120 MB in the lab).
	trimAbove = 8 << 20
	// quietBytes is the most traffic, both ways through the tunnel, that a
	// trimEvery interval may carry and still count as quiet: 512 KiB in
	// 1 s is 4 Mbit/s, keepalives and interactive use but no transfer.
	quietBytes = 512 << 10
	// churnAllocs is how much the daemon must have allocated since the last
	// trim (or its start) before a quiet tunnel's heap is trimmed for less
	// than trimAbove: ~30 connects and disconnects, or ~20 minutes at rest.
	churnAllocs = 16 << 20
	// churnAbove is the least growth of the retained heap over its level at
	// rest that such a trim gives back.
	churnAbove = 2 << 20
)

// memReading is one look at the daemon's memory and the tunnel.
type memReading struct {
	allocs   uint64 // bytes ever allocated on the heap (grows only)
	retained uint64 // heap in RAM: objects, free and unused spans not yet released to the OS
	tunnel   uint64 // bytes through the tunnel, all peers, both ways, since the watch began (tunnelMeter)
	tunnelOK bool   // tunnel was read: only when the heap is worth trimming
}

// trimState is what the watcher remembers between readings.
type trimState struct {
	floor   uint64     // retained heap at rest: at start, after the last trim, or lower since
	base    uint64     // bytes ever allocated, at start or at the last trim
	prev    memReading // the last reading
	hasPrev bool
	quiet   int // quiet intervals in a row, up to the last reading
	// need is the quiet intervals a trim waits for now (0: minQuiet).
	need int
	// sinceBurst counts the intervals since the burst that the last trim
	// followed, the trim's own wait included, until the next burst or
	// maxQuiet of them judge the trim (0: no trim to judge).
	sinceBurst int
}

// needed is how many quiet intervals a trim waits for now.
func (s trimState) needed() int { return min(max(s.need, minQuiet), maxQuiet) }

// wantsTunnel says whether a reading needs the tunnel's counters: only one
// that could lead to a trim, after a burst (the retained heap trimAbove
// over the floor) or after churn (churnAllocs allocated since the last
// trim, and churnAbove to give back).
func (s trimState) wantsTunnel(cur memReading) bool {
	return s.afterBurst(cur.retained) || cur.allocs >= s.base+churnAllocs && cur.retained >= s.floor+churnAbove
}

// afterBurst says whether the retained heap is trimAbove over the floor,
// as a burst of traffic leaves it.
func (s trimState) afterBurst(retained uint64) bool { return retained >= s.floor+trimAbove }

// cause names what a trim at this retained heap followed, for its log line.
func (s trimState) cause(retained uint64) string {
	if s.afterBurst(retained) {
		return "a burst of traffic"
	}
	return "connects and disconnects"
}

// next takes a reading and says whether to trim now. An interval is quiet
// when the reading is worth a trim (wantsTunnel) and the tunnel carried
// at most quietBytes since the previous reading, which must have read the
// tunnel too; it trims after needed() quiet intervals in a row. Any
// other interval starts the count again: traffic, a heap below the line,
// the first reading above it (a burst shorter than an interval is judged
// from the next one), and a count that went down (tunnelMeter's never
// does; a sum over the present peers did when one left with its
// counters: such an interval cannot be judged). The floor follows the heap
// down (the scavenger returns pages on its own too), so "grown" is measured
// from the lowest level since the last trim; after a trim the caller sets it
// with trimmed.
func (s trimState) next(cur memReading) (trimState, bool) {
	prev, hadPrev := s.prev, s.hasPrev
	s.prev, s.hasPrev = cur, true
	s.floor = min(s.floor, cur.retained)
	if s.sinceBurst > 0 { // was the last burst's trim early?
		s.sinceBurst++
		switch {
		case s.afterBurst(cur.retained) && s.sinceBurst <= maxQuiet+1:
			// Another burst, which the longest wait would have found
			// warm: wait past the quiet it followed next time.
			quietBefore := s.sinceBurst - 1
			s.need, s.sinceBurst = min(max(2*s.needed(), quietBefore+2), maxQuiet), 0
		case s.afterBurst(cur.retained) || s.sinceBurst > maxQuiet+1:
			// None within the longest wait: the trim was right.
			s.need, s.sinceBurst = max(s.needed()/2, minQuiet), 0
		}
	}
	judged := s.wantsTunnel(cur) && hadPrev && prev.tunnelOK && cur.tunnelOK && cur.tunnel >= prev.tunnel
	if !judged || cur.tunnel-prev.tunnel > quietBytes {
		s.quiet = 0
		return s, false
	}
	s.quiet++
	return s, s.quiet >= s.needed()
}

// trimmed records the retained heap a trim left as the new level at rest,
// and the bytes allocated by then; the next interval starts from the
// reading after it. A trim after a burst (burst) is judged by what follows
// it (next); the wait it was given is kept.
func (s trimState) trimmed(allocs, retained uint64, burst bool) trimState {
	t := trimState{floor: retained, base: allocs, need: s.need}
	if burst {
		t.sinceBurst = s.quiet
	}
	return t
}

// memWatch is the watcher's surroundings, injected for the tests.
type memWatch struct {
	log    *slog.Logger
	tick   <-chan time.Time
	heap   func() (allocs, retained uint64, gcOff bool)
	tunnel func() (uint64, error)
	trim   func()
	// pace, if set, is called after every reading at rest: the heap not
	// grown trimAbove over its floor, or the tunnel quiet. The GC's pacing
	// follows the live heap at rest (gc.go), not the packets in flight
	// of a burst. "Or quiet": the floor is taken at the watcher's start,
	// which can come before wireguard-go has allocated its receive
	// batches, so the heap at rest can look like a burst's until the
	// first trim (seen in CI: GOGC left at 100 through 50 connects).
	pace func()
}

// watchMemory trims the daemon's memory after bursts of traffic (see the
// comment at the top of this file) until ctx ends.
func watchMemory(ctx context.Context, w memWatch) {
	allocs, retained, _ := w.heap()
	s := trimState{floor: retained, base: allocs}
	tunnelErr := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.tick:
		}
		var cur memReading
		var gcOff bool
		cur.allocs, cur.retained, gcOff = w.heap()
		if gcOff {
			s = trimState{floor: cur.retained, base: cur.allocs}
			continue
		}
		if s.wantsTunnel(cur) {
			n, err := w.tunnel()
			if err != nil && !tunnelErr {
				w.log.Debug("memory trim: cannot read the tunnel's counters, so no trim", "err", err)
			}
			tunnelErr = err != nil
			cur.tunnel, cur.tunnelOK = n, err == nil
		}
		var trim bool
		prevAllocs := s.prev.allocs
		s, trim = s.next(cur)
		if w.pace != nil && (!s.afterBurst(cur.retained) || s.quiet > 0) {
			w.pace()
		}
		if !trim {
			continue
		}
		start := time.Now()
		w.trim()
		allocsAfter, after, _ := w.heap()
		w.log.Debug("memory trimmed on a quiet tunnel",
			"after", s.cause(cur.retained), "quietSeconds", (time.Duration(s.quiet) * trimEvery).Seconds(),
			"retainedBefore", cur.retained, "retainedAfter", after,
			"allocatedSinceLastTrim", cur.allocs-s.base, "allocatedInInterval", cur.allocs-prevAllocs,
			"took", time.Since(start).Round(time.Microsecond))
		s = s.trimmed(allocsAfter, after, s.afterBurst(cur.retained))
	}
}

// trimMemory collects twice, so that what sync.Pools held is freed (the
// first collection moves a pool's contents to its victim cache, the second
// drops them), and returns every free page to the OS: debug.FreeOSMemory
// is that second collection followed by a full scavenge.
func trimMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// heapReader reads the heap from runtime/metrics into samples allocated
// once, so that a look at rest allocates nothing.
type heapReader struct{ s []metrics.Sample }

func newHeapReader() *heapReader {
	return &heapReader{s: []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/gc/gogc:percent"},
		{Name: "/gc/heap/live:bytes"},
	}}
}

// live is the heap the last collection found live, as of the last read.
func (r *heapReader) live() uint64 {
	if r.s[5].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return r.s[5].Value.Uint64()
}

func (r *heapReader) read() (allocs, retained uint64, gcOff bool) {
	metrics.Read(r.s)
	u := func(i int) uint64 {
		if r.s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return r.s[i].Value.Uint64()
	}
	return u(0), u(1) + u(2) + u(3), r.s[4].Value.Kind() == metrics.KindUint64 && int64(u(4)) < 0
}

// startMemoryWatch starts watchMemory over the bytes the tunnel carried
// (traffic reads the device's per-peer counters, metered by a
// tunnelMeter), pacing the GC with gc (nil: GOGC is the operator's); wait
// returns once ctx has ended and the watcher stopped.
func startMemoryWatch(ctx context.Context, log *slog.Logger, traffic func() (map[wgtypes.Key]uint64, error), gc *gcPacer) (wait func()) {
	done := make(chan struct{})
	t := time.NewTicker(trimEvery)
	var m tunnelMeter // the watcher's goroutine alone reads it
	tunnel := func() (uint64, error) {
		peers, err := traffic()
		if err != nil {
			return 0, err
		}
		return m.add(peers), nil
	}
	go func() {
		defer close(done)
		defer t.Stop()
		hr := newHeapReader()
		watchMemory(ctx, memWatch{log: log, tick: t.C, heap: hr.read, tunnel: tunnel, trim: trimMemory,
			pace: func() { gc.pace(hr.live()) }})
	}()
	return func() { <-done }
}

// tunnelMeter turns readings of the tunnel's per-peer counters into one
// count of the bytes it carried that only grows. A sum over the present
// peers would not do: a peer that leaves takes its counters with it, and
// one that comes back (a connect after a disconnect, a server's restart)
// starts again from zero, so the sum falls at every disconnect and the
// interval cannot be judged; under connect/disconnect churn, the very
// time a churn trim is for, almost no interval could be, and the churn's
// garbage was never given back while it lasted (RSS 25.6–26.1 MiB after
// 400 connects in the lab). The meter adds what each peer grew by since
// the last reading; a peer it has not seen, or whose counters went back,
// adds all it shows.
type tunnelMeter struct {
	last  map[wgtypes.Key]uint64 // each present peer's counters at the last reading
	total uint64
}

// add takes a reading (each peer's received plus sent bytes) and returns
// the total so far.
func (m *tunnelMeter) add(peers map[wgtypes.Key]uint64) uint64 {
	for k, n := range peers {
		if was, ok := m.last[k]; ok && n >= was {
			m.total += n - was
		} else {
			m.total += n
		}
	}
	m.last = peers
	return m.total
}
