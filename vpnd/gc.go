package vpnd

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
)

// Why the daemon paces its own garbage collector.
//
// On Linux wireguard-go gives the TUN reader and each UDP receiver (IPv4,
// IPv6) a batch of 128 packet buffers of 64 KiB (conn.IdealBatchSize, for
// the TUN offloads): 384 buffers, ~25 MB that the GC counts as live heap
// for the device's lifetime, though the kernel backs only the pages that
// packets touched (the daemon's anonymous RSS is ~5 MB with two clusters
// up). With Go's default GOGC=100 the GC then waits for another ~27 MB of
// allocation before it collects, and the ordinary short-lived garbage of
// each connect or disconnect (device reads, status JSON, control requests:
// ~0.5 MB) fills fresh pages all that way: measured in the lab, RSS grew
// from 19 MB to ~48 MB over 200 disconnect/connect rounds while the live
// heap after a GC stayed flat at 28 MB (no peer or other object is kept).
// So once the tunnel is up the daemon sets GOGC to allow gcHeadroom of
// garbage over the live heap, and keeps it there as the heap at rest moves
// (gcPacer). The garbage's pages stay resident between collections (the
// scavenger keeps what the heap's goal may use again), so the headroom is
// RSS: with 6 MiB the daemon ended 400 connects and disconnects at
// 8.7–13.4 MiB of anonymous memory, with 4 MiB at 8.5–8.7 MiB in the same
// lab, alternated (2026-12-07, docs/performance.md), for ~1.6× the
// collections (142 against 90 over the 400: cheap, as the buffers hold
// no pointers to mark) and no change to the connects' times beyond the
// runs' spread.
//
// A soft memory limit (GOMEMLIMIT) would cap the idle case as well, but
// under load the packets in flight are live heap too (45–55 MB with
// iperf3): with a 40 MiB limit the GC ran nearly non-stop and iperf3
// through the tunnel halved. A GC percent keeps the headroom proportional
// as the heap grows (under that load the daemon hardly collects at all),
// and each collection is cheap because packet buffers hold no pointers.
const gcHeadroom = 4 << 20

// gcPercent is the GOGC that lets about headroom bytes of garbage gather
// over a live heap of live bytes: never above Go's default of 100 (a small
// heap, as where wireguard-go reads one packet at a time, keeps the
// default) nor below 10 (collections stay spaced however big the heap).
func gcPercent(live, headroom uint64) int {
	if live == 0 {
		return 100
	}
	return int(min(max(headroom*100/live, 10), 100))
}

// paceGC sets the GC percent for the live heap as it is now (call it once
// the tunnel is up), unless the environment sets GOGC (an operator's
// choice wins: the pacer is then nil, and its pace does nothing). It
// returns the pacer, which the memory watch keeps following the heap at
// rest (trim.go), and a func that restores the setting from before it.
func paceGC(log *slog.Logger, envGOGC string) (_ *gcPacer, restore func()) {
	if envGOGC != "" {
		log.Debug("GOGC set in the environment: keeping it", "GOGC", envGOGC)
		return nil, func() {}
	}
	runtime.GC()
	p := &gcPacer{log: log, set: debug.SetGCPercent}
	hr := newHeapReader() // trim.go: the memory watch reads the same
	hr.read()
	p.pace(hr.live())
	return p, p.restore
}

// gcPacer keeps the GC percent where gcPercent puts it for the live heap
// at rest. Pacing once at start was not enough: wireguard-go allocates its
// receive batches in its own goroutines once the device is up, and the
// start's collection could run before they had, find a few MB live
// instead of ~36, and leave the GC at 100 %: ~35 MB of garbage then piled
// up over the buffers between collections, and the daemon's anonymous
// memory grew 25–30 MiB over 50 connects (TestDaemonMemoryFlat under
// load, as in CI, where the start is slow). So the memory watch hands it
// the live heap at every reading while the heap is at rest.
type gcPacer struct {
	log *slog.Logger
	set func(int) int // debug.SetGCPercent

	mu   sync.Mutex
	live uint64 // the live heap the percent was derived from
	pct  int    // the percent set; 0 while none is
	orig int    // the percent before the first
}

// pace sets the percent for live bytes of live heap, unless live is within
// an eighth of the heap the percent was last derived from (the heap
// breathes by a few percent between collections: no resetting for that).
func (p *gcPacer) pace(live uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pct != 0 && live >= p.live-p.live/8 && live <= p.live+p.live/8 {
		return
	}
	pct := gcPercent(live, gcHeadroom)
	p.live = live
	if pct == p.pct {
		return
	}
	prev := p.set(pct)
	if p.pct == 0 {
		p.orig = prev
	}
	p.pct = pct
	p.log.Debug("GC paced for the tunnel's packet buffers", "liveHeapBytes", live, "gcPercent", pct, "was", prev)
}

// restore puts back the percent from before the first pace.
func (p *gcPacer) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pct != 0 {
		p.set(p.orig)
		p.pct = 0
	}
}
