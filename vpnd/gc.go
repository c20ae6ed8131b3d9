package vpnd

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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
// garbage over the live heap it sees then: RSS levels off at ~26.6 MB.
//
// A soft memory limit (GOMEMLIMIT) would cap the idle case as well, but
// under load the packets in flight are live heap too (45–55 MB with
// iperf3): with a 40 MiB limit the GC ran nearly non-stop and iperf3
// through the tunnel halved. A GC percent keeps the headroom proportional
// as the heap grows (under that load the daemon hardly collects at all),
// and each collection is cheap because packet buffers hold no pointers.
const gcHeadroom = 6 << 20

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
// choice wins), and returns a func that restores the previous setting.
func paceGC(log *slog.Logger, envGOGC string) (restore func()) {
	if envGOGC != "" {
		log.Debug("GOGC set in the environment: keeping it", "GOGC", envGOGC)
		return func() {}
	}
	runtime.GC()
	live := liveHeap()
	pct := gcPercent(live, gcHeadroom)
	prev := debug.SetGCPercent(pct)
	log.Debug("GC paced for the tunnel's packet buffers", "liveHeapBytes", live, "gcPercent", pct)
	return func() { debug.SetGCPercent(prev) }
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
