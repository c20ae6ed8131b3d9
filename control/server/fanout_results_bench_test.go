//go:build linux

package server

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fanOutResult is one sub-benchmark of BenchmarkMoveFanOutReplicas as
// RUNOS_FANOUT_JSON writes it. The text output keeps only ten lines of a
// sub-benchmark's log (testing trims the rest), so with failovers logged
// the later rounds are lost there; this keeps every one, and the machine
// the numbers depend on besides the code.
type fanOutResult struct {
	Benchmark  string    `json:"benchmark"`
	OK         bool      `json:"ok"` // the sub-benchmark passed
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Replicas   int       `json:"replicas"`
	Devices    int       `json:"devices"`
	Stream     bool      `json:"stream"`
	// TLSGate: the replicas admitted handshakes through control/tlsgate
	// (absent in results from before it).
	TLSGate bool `json:"tlsGate"`
	// The measured run (the framework's last call) at the top; the calls
	// before it, its warm-ups, apart.
	fanOutRun
	Warmup  []*fanOutRun  `json:"warmup,omitempty"`
	Machine fanOutMachine `json:"machine"`

	runs []*fanOutRun
}

// fanOutRun is one call of the sub-benchmark by the framework (b.N
// rounds).
type fanOutRun struct {
	N         int              `json:"n"`
	Rounds    []fanOutRound    `json:"rounds"`
	Failovers []fanOutFailover `json:"failovers,omitempty"`
	// Metrics are those b.ReportMetric reported, by unit, and ns/op.
	Metrics map[string]float64 `json:"metrics"`
}

type fanOutRound struct {
	Round int     `json:"round"`
	AllMs float64 `json:"allMs"` // commit to the last device
	P50Ms float64 `json:"p50Ms"`
}

// fanOutFailover is one replica killed and how long its devices went
// without their map's long-poll or stream.
type fanOutFailover struct {
	Kill    int     `json:"kill"`    // 1-based, the replica killed
	Devices int     `json:"devices"` // re-established on the others
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	MaxMs   float64 `json:"maxMs"`
}

// fanOutMachine is what bounds a run on this machine: how many devices fit
// in a process (the open-file limit), the memory, the CPUs, and how busy
// others kept them.
type fanOutMachine struct {
	GOMAXPROCS int `json:"gomaxprocs"`
	NumCPU     int `json:"numCPU"`
	// The open-file limit as the run had it (raiseNoFile's, inherited by
	// the replicas and the devices' helpers).
	NoFileSoft   uint64    `json:"noFileSoft"`
	NoFileHard   uint64    `json:"noFileHard"`
	MemTotalKB   int64     `json:"memTotalKB"`
	LoadAvgStart []float64 `json:"loadAvgStart"` // 1, 5, 15 minutes
	LoadAvgEnd   []float64 `json:"loadAvgEnd"`
	GoVersion    string    `json:"goVersion"`
	Commit       string    `json:"commit"` // git rev-parse HEAD, "" outside a checkout
}

func newFanOutResult(replicas int) *fanOutResult {
	return &fanOutResult{Replicas: replicas, StartedAt: time.Now().UTC(),
		Machine: fanOutMachine{LoadAvgStart: loadAvg()}}
}

// begin records a new call of the sub-benchmark and returns its run.
func (r *fanOutResult) begin(b *testing.B, devices int, stream bool) *fanOutRun {
	r.Benchmark, r.Devices, r.Stream = b.Name(), devices, stream
	r.TLSGate = os.Getenv("RUNOS_FANOUT_TLSGATE") != "0"
	run := &fanOutRun{N: b.N, Metrics: map[string]float64{}}
	r.runs = append(r.runs, run)
	return run
}

// metric reports a metric and keeps it.
func (run *fanOutRun) metric(b *testing.B, v float64, unit string) {
	b.ReportMetric(v, unit)
	run.Metrics[unit] = v
}

// write puts the result in dir as
// fanout-replicas-<replicas>-<devices>-<start, UTC>.json.
func (r *fanOutResult) write(dir string, ok bool) error {
	r.OK, r.FinishedAt = ok, time.Now().UTC()
	if n := len(r.runs); n > 0 {
		r.fanOutRun, r.Warmup = *r.runs[n-1], r.runs[:n-1]
	}
	m := &r.Machine
	m.GOMAXPROCS, m.NumCPU, m.GoVersion = runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.Version()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		m.NoFileSoft, m.NoFileHard = lim.Cur, lim.Max
	}
	m.MemTotalKB = memTotalKB()
	m.LoadAvgEnd = loadAvg()
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", r.Benchmark, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("fanout-replicas-%d-%d-%s.json", r.Replicas, r.Devices, r.StartedAt.Format("20060102T150405Z")))
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s result: %w", r.Benchmark, err)
	}
	return nil
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute loads (nil if unreadable).
func loadAvg() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	var out []float64
	for _, f := range strings.Fields(string(b)) {
		if len(out) == 3 {
			break
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// memTotalKB is /proc/meminfo's MemTotal (0 if unreadable).
func memTotalKB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb
		}
	}
	return 0
}
