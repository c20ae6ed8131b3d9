package benchplot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// fanOutReplicasDoc is the part of a BenchmarkMoveFanOutReplicas result
// (RUNOS_FANOUT_JSON=<dir>, control/server/fanout_results_bench_test.go)
// the plots read: the measured run's rounds at the top, its warm-ups
// apart.
type fanOutReplicasDoc struct {
	Benchmark string `json:"benchmark"`
	OK        bool   `json:"ok"`
	Replicas  int    `json:"replicas"`
	Devices   int    `json:"devices"`
	Stream    bool   `json:"stream"`
	Rounds    []struct {
		AllMs float64 `json:"allMs"`
	} `json:"rounds"`
}

// ParseFanOutReplicasJSON is the rounds of one BenchmarkMoveFanOutReplicas
// result file (not its warm-ups); a sub-benchmark that failed gives none,
// as go test prints no result line for it.
func ParseFanOutReplicasJSON(b []byte) ([]FanOutRound, error) {
	var d fanOutReplicasDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(d.Benchmark, "BenchmarkMoveFanOutReplicas") || d.Replicas < 1 || d.Devices < 1 {
		return nil, fmt.Errorf("not a BenchmarkMoveFanOutReplicas result (benchmark %q, %d replicas, %d devices)", d.Benchmark, d.Replicas, d.Devices)
	}
	if !d.OK {
		return nil, nil
	}
	out := make([]FanOutRound, 0, len(d.Rounds))
	for _, r := range d.Rounds {
		out = append(out, FanOutRound{Devices: d.Devices, AllMs: r.AllMs, Stream: d.Stream, Replicas: d.Replicas})
	}
	return out, nil
}

// parseFanOutFile is the rounds of a file of either kind: a result
// document (one JSON object with a "benchmark") or `go test` output,
// plain or -json (a stream of objects with an "Action").
func parseFanOutFile(b []byte) ([]FanOutRound, error) {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		var first struct{ Benchmark string }
		if json.NewDecoder(bytes.NewReader(b)).Decode(&first) == nil && first.Benchmark != "" {
			return ParseFanOutReplicasJSON(b)
		}
	}
	return ParseFanOut(b), nil
}
