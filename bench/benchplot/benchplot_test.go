package benchplot

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	want := []FanOutRound{{10000, 922, 566, false}, {10000, 1022, 504, false}, {5000, 300, 200, true}}
	check := func(name string, got []FanOutRound) {
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
	check("plain", ParseFanOut([]byte(text)))
	// The same as a go test -json stream, split mid-line as go test does.
	var js strings.Builder
	for _, chunk := range strings.SplitAfter(text, "ms, ") {
		b, _ := json.Marshal(map[string]string{"Action": "output", "Output": chunk})
		js.Write(append(b, '\n'))
	}
	check("json", ParseFanOut([]byte(js.String())))
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
	written, err := RenderDir(dir, []string{fan}, []string{fan})
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
	if len(written) != len(want) {
		t.Errorf("written %v, want %d files", written, len(want))
	}
}
