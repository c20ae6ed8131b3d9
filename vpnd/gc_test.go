package vpnd

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"
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
	restore := paceGC(log, "200")
	if got := gcPercentNow(); got != 77 {
		t.Errorf("GOGC in the environment: paceGC changed the GC percent to %d", got)
	}
	restore()

	restore = paceGC(log, "")
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
