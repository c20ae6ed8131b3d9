package benchplot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseFanOutDropsWarmUpRounds(t *testing.T) {
	text := `goos: linux
BenchmarkMoveFanOut-2   	       5	 992515951 ns/op	     10001 conns	     10000 devices	       922.3 ms-all
--- BENCH: BenchmarkMoveFanOut-2
    fanout_bench_test.go:267: round 0: all 795 ms, written 572 ms, p50 486 ms; cpu control 824 ms, devices 658 ms
    fanout_bench_test.go:267: round 0: all 922 ms, written 566 ms, p50 548 ms; cpu control 887 ms, devices 828 ms
    fanout_bench_test.go:267: round 1: all 1022 ms, written 504 ms, p50 742 ms; cpu control 938 ms, devices 1088 ms
BenchmarkMoveFanOut-2   	       1	 392515951 ns/op	     5001 conns	     5000 devices	       322.3 ms-all	         1.000 stream
--- BENCH: BenchmarkMoveFanOut-2
    fanout_bench_test.go:267: round 0: all 300 ms, written 200 ms, p50 150 ms; cpu control 1 ms, devices 1 ms
PASS
`
	want := []FanOutRound{{Devices: 10000, AllMs: 922, WrittenMs: 566}, {Devices: 10000, AllMs: 1022, WrittenMs: 504},
		{Devices: 5000, AllMs: 300, WrittenMs: 200, Stream: true}}
	checkRounds(t, "plain", ParseFanOut([]byte(text)), want)
	checkRounds(t, "json", ParseFanOut(goTestJSON(text)), want)
}

// goTestJSON is text as a go test -json stream, split mid-line as go test
// does.
func goTestJSON(text string) []byte {
	var js strings.Builder
	for _, chunk := range strings.SplitAfter(text, "ms, ") {
		b, _ := json.Marshal(map[string]string{"Action": "output", "Output": chunk})
		js.Write(append(b, '\n'))
	}
	return []byte(js.String())
}

func checkRounds(t *testing.T, name string, got, want []FanOutRound) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %+v, want %+v", name, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: round %d = %+v, want %+v", name, i, got[i], want[i])
		}
	}
}

// BenchmarkMoveFanOutReplicas's output (-benchtime=3x, so a warm-up run of
// one round first): its rounds have no "written"; the kills' lines come
// between the runs, and go test cuts the log at ten lines.
func TestParseFanOutReplicas(t *testing.T) {
	text := `goos: linux
pkg: github.com/runos/vpn/control/server
BenchmarkMoveFanOutReplicas/replicas-1-2         	       3	 784827489 ns/op	       741.4 cpu-ms-devices	       660.0 cpu-ms-r1	     10000 devices	       764.6 ms-all	       452.2 ms-p50	       760.3 ms-p99	       708.3 rss-MB-r1
--- BENCH: BenchmarkMoveFanOutReplicas/replicas-1-2
    fanout_replicas_bench_test.go:172: 10000 devices in 1 helper processes (at most 19000 each: the open-file limit), 1 replicas
    fanout_replicas_bench_test.go:224: round 0: all 1015 ms, p50 581 ms; cpu r1 780 ms, devices 1104 ms
    fanout_replicas_bench_test.go:172: 10000 devices in 1 helper processes (at most 19000 each: the open-file limit), 1 replicas
    fanout_replicas_bench_test.go:224: round 0: all 608 ms, p50 360 ms; cpu r1 580 ms, devices 540 ms
    fanout_replicas_bench_test.go:224: round 1: all 765 ms, p50 452 ms; cpu r1 660 ms, devices 741 ms
    fanout_replicas_bench_test.go:224: round 2: all 974 ms, p50 606 ms; cpu r1 880 ms, devices 1001 ms
BenchmarkMoveFanOutReplicas/replicas-3-2         	       3	 932743571 ns/op	       880.5 cpu-ms-devices	       310.0 cpu-ms-r1	       320.0 cpu-ms-r2	       310.0 cpu-ms-r3	     10000 devices	      6406 failover-ms-max	      3600 failover-ms-p50	      4813 failover-ms-p99	      1022 ms-all	       667.4 ms-p50	      1016 ms-p99	       258.7 rss-MB-r1	       224.0 rss-MB-r2	       214.8 rss-MB-r3
--- BENCH: BenchmarkMoveFanOutReplicas/replicas-3-2
    fanout_replicas_bench_test.go:224: round 0: all 1182 ms, p50 588 ms; cpu r1 310 ms, r2 310 ms, r3 320 ms, devices 1320 ms
    fanout_replicas_bench_test.go:254: before kill 1: watchers [3334 3333 3333]
    fanout_replicas_bench_test.go:267: failover 1: replica r1 killed; 3334 devices re-established in p50 2236 ms, p99 3719 ms, max 3731 ms
    fanout_replicas_bench_test.go:254: before kill 2: watchers [0 6667 3333]
    fanout_replicas_bench_test.go:267: failover 2: replica r2 killed; 6667 devices re-established in p50 3352 ms, p99 4516 ms, max 4519 ms
    fanout_replicas_bench_test.go:254: before kill 3: watchers [0 0 10000]
    fanout_replicas_bench_test.go:267: failover 3: replica r3 killed; 10000 devices re-established in p50 5759 ms, p99 7949 ms, max 7962 ms
    fanout_replicas_bench_test.go:224: round 0: all 713 ms, p50 432 ms; cpu r1 240 ms, r2 240 ms, r3 220 ms, devices 620 ms
    fanout_replicas_bench_test.go:224: round 1: all 1022 ms, p50 667 ms; cpu r1 310 ms, r2 420 ms, r3 330 ms, devices 881 ms
    fanout_replicas_bench_test.go:224: round 2: all 1060 ms, p50 762 ms; cpu r1 350 ms, r2 320 ms, r3 310 ms, devices 1053 ms
	... [output truncated]
BenchmarkMoveFanOutReplicas/replicas-8-2         	fan-out helper: stream: Get "https://127.0.0.1:34241/v1/devices/dev-4830/map?since=12&stream=1&wait=60": EOF
fan-out helper: stream: Get "https://127.0.0.1:34241/v1/devices/dev-5652/map?since=12&stream=1&wait=60": EOF
       1	 369381197 ns/op	       226.4 cpu-ms-devices	        90.00 cpu-ms-r1	     50000 devices	     11019 failover-ms-max	       280.0 ms-all	         1.000 stream
--- BENCH: BenchmarkMoveFanOutReplicas/replicas-8-2
    fanout_replicas_bench_test.go:224: round 0: all 572 ms, p50 469 ms; cpu r1 140 ms, r2 140 ms, r3 140 ms, devices 246 ms
PASS
`
	want := []FanOutRound{
		{Devices: 10000, AllMs: 608, Replicas: 1}, {Devices: 10000, AllMs: 765, Replicas: 1}, {Devices: 10000, AllMs: 974, Replicas: 1},
		{Devices: 10000, AllMs: 713, Replicas: 3}, {Devices: 10000, AllMs: 1022, Replicas: 3}, {Devices: 10000, AllMs: 1060, Replicas: 3},
		// The result line split by a helper's stderr.
		{Devices: 50000, AllMs: 572, Stream: true, Replicas: 8},
	}
	checkRounds(t, "plain", ParseFanOut([]byte(text)), want)
	checkRounds(t, "json", ParseFanOut(goTestJSON(text)), want)
}

// A RUNOS_FANOUT_JSON file gives its measured rounds, not its warm-ups';
// a failed sub-benchmark's none.
func TestParseFanOutReplicasJSON(t *testing.T) {
	doc := `{"benchmark": "BenchmarkMoveFanOutReplicas/replicas-3", "ok": true, "replicas": 3, "devices": 100000, "stream": true,
  "n": 2, "rounds": [{"round": 0, "allMs": 4100.5, "p50Ms": 2000}, {"round": 1, "allMs": 3900, "p50Ms": 1900}],
  "failovers": [{"kill": 1, "devices": 33334, "p50Ms": 9000, "p99Ms": 12000, "maxMs": 12100}],
  "metrics": {"ms-all": 4100.5, "devices": 100000, "stream": 1},
  "warmup": [{"n": 1, "rounds": [{"round": 0, "allMs": 9999, "p50Ms": 5000}]}],
  "machine": {"gomaxprocs": 2, "numCPU": 2, "noFileSoft": 20000, "noFileHard": 20000, "memTotalKB": 24683792,
    "loadAvgStart": [1, 2, 3], "loadAvgEnd": [4, 5, 6], "goVersion": "go1.26.8", "commit": ""}}
`
	got, err := parseFanOutFile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	checkRounds(t, "ok", got, []FanOutRound{{Devices: 100000, AllMs: 4100.5, Stream: true, Replicas: 3}, {Devices: 100000, AllMs: 3900, Stream: true, Replicas: 3}})
	failed := strings.Replace(doc, `"ok": true`, `"ok": false`, 1)
	if got, err := parseFanOutFile([]byte(failed)); err != nil || len(got) != 0 {
		t.Errorf("failed run: %+v, %v; want no rounds", got, err)
	}
	if _, err := parseFanOutFile([]byte(`{"benchmark": "lab-connect"}`)); err == nil {
		t.Error("another benchmark's document read as a replicas result")
	}
}

func TestRenderDirDrawsEveryPlot(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("lab-move-switch-1.json", map[string]any{"benchmark": "lab-move-switch", "startedAt": "1",
		"params":  map[string]any{"clients": 10, "moves": 3},
		"samples": map[string][]float64{"control-switch-ms": {30, 40, 50}, "laptop-status-ms": {20, 30, 60}}})
	write("lab-connect-1.json", map[string]any{"benchmark": "lab-connect", "startedAt": "1",
		"samples": map[string][]float64{"api-status-ms": {8, 9, 110}, "cli-status-ms": {15, 16, 120}}})
	write("lab-throughput-1.json", map[string]any{"benchmark": "lab-throughput", "startedAt": "1",
		"samples": map[string][]float64{"runos-vs-stock": {5, 5.2}, "runos-vs-bare": {0.15, 0.16}}})
	fan := filepath.Join(t.TempDir(), "fanout.txt")
	if err := os.WriteFile(fan, []byte("BenchmarkMoveFanOut-2 1 1 ns/op 100 devices\n round 0: all 9 ms, written 5 ms\n"+
		"BenchmarkMoveFanOut-2 1 1 ns/op 100 devices 1 stream\n round 0: all 4 ms, written 2 ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reps := filepath.Join(t.TempDir(), "fanout-replicas-3-1000-20261205T000000Z.json")
	if err := os.WriteFile(reps, []byte(`{"benchmark": "BenchmarkMoveFanOutReplicas/replicas-3", "ok": true,
		"replicas": 3, "devices": 1000, "stream": true, "rounds": [{"allMs": 12}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	written, err := RenderDir(dir, []string{fan}, []string{fan}, []string{reps})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"lab-connect-1.svg", "lab-move-switch-1.svg", "lab-throughput-1.svg",
		"plots/" + MoveSwitchSVG, "plots/" + FanOutSVG, "plots/" + FanOutStreamsSVG, "plots/" + ConnectSVG, "plots/" + ThroughputSVG}
	for _, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, w))
		if err != nil {
			t.Errorf("%s not drawn (written: %v): %v", w, written, err)
			continue
		}
		if !strings.Contains(string(b), "<svg") {
			t.Errorf("%s is not SVG: %.80s", w, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "plots", FanOutStreamsSVG)); !strings.Contains(string(b), "streams, 3 replicas: median, last device") {
		t.Errorf("%s has no line for the replicas", FanOutStreamsSVG)
	}
	if len(written) != len(want) {
		t.Errorf("written %v, want %d files", written, len(want))
	}
}

// The labels that would overprint go, the largest counts keep theirs; on
// today's axis (up to 19,000) every count keeps its label.
func TestDeviceTicksClearEachOther(t *testing.T) {
	labels := func(ns []int, span float64) []string {
		var out []string
		for _, tk := range deviceTicks(ns, span) {
			out = append(out, tk.Label)
		}
		return out
	}
	got := labels([]int{0, 1000, 5000, 10000, 19000, 50000, 100000}, 108000)
	if want := []string{"", "1000", "", "10000", "19000", "50000", "100000"}; !slices.Equal(got, want) {
		t.Errorf("up to 100,000: labels %q, want %q", got, want)
	}
	got = labels([]int{0, 1000, 5000, 10000, 19000}, 19000*1.08)
	if want := []string{"0", "1000", "5000", "10000", "19000"}; !slices.Equal(got, want) {
		t.Errorf("up to 19,000: labels %q, want %q", got, want)
	}
}
