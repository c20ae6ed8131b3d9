package benchplot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// FanOutRound is one round of BenchmarkMoveFanOut or
// BenchmarkMoveFanOutReplicas: how many devices held a long-poll (or,
// Stream, a push stream), and the time from the commit to the last
// device's answer and (BenchmarkMoveFanOut only) to control's last answer
// written. Replicas is 0 for BenchmarkMoveFanOut (control in the
// benchmark's process, its store SQLite) and the number of control
// processes for BenchmarkMoveFanOutReplicas (over PostgreSQL).
type FanOutRound struct {
	Devices   int
	AllMs     float64
	WrittenMs float64
	Stream    bool
	Replicas  int
}

var (
	// BenchmarkMoveFanOut-2   5   992515951 ns/op   10001 conns ... 10000 devices ...
	// BenchmarkMoveFanOutReplicas/replicas-3-2   3   932743571 ns/op ... 10000 devices ...
	// A helper's stderr may split the line after the name (go test prints
	// the name first); fanOutCounts then finds the rest on a line of its
	// own.
	fanOutName    = regexp.MustCompile(`^BenchmarkMoveFanOut(Replicas/replicas-(\d+))?(-\d+)?\s`)
	fanOutCounts  = regexp.MustCompile(`^\d+\s+[\d.]+ ns/op\b`)
	fanOutDevices = regexp.MustCompile(`\s(\d+) devices\b`)
	// ... 10000 devices ... 1.000 stream: a run with RUNOS_FANOUT_STREAM=1.
	fanOutStream = regexp.MustCompile(`\s1(\.0*)? stream\b`)
	// fanout_bench_test.go:267: round 0: all 795 ms, written 572 ms, p50 486 ms; ...
	// fanout_replicas_bench_test.go:224: round 0: all 1182 ms, p50 588 ms; ... (no written)
	fanOutRoundLine = regexp.MustCompile(`round (\d+): all ([\d.]+) ms(?:, written ([\d.]+) ms)?`)
)

// ParseFanOut reads the rounds of every BenchmarkMoveFanOut and
// BenchmarkMoveFanOutReplicas in `go test` output, plain or -json (whose
// output events are joined first). A run's rounds follow its result line;
// the framework's warm-up runs come first (their round numbers start again
// at 0) and are dropped, as the benchmark's own summary drops them.
//
// go test keeps only ten log lines of a benchmark, so a replicas run that
// killed replicas (three log lines a kill) shows only its first rounds
// here; its RUNOS_FANOUT_JSON file (ParseFanOutReplicasJSON) has them all.
func ParseFanOut(b []byte) []FanOutRound {
	text := joinJSONOutput(b)
	var out, block []FanOutRound
	// The run whose rounds follow: its devices are 0 until its result
	// line is read.
	devices, replicas, stream := 0, 0, false
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	flush := func() {
		out = append(out, block...)
		block = nil
	}
	result := func(line string) {
		if m := fanOutDevices.FindStringSubmatch(line); m != nil {
			devices, _ = strconv.Atoi(m[1])
			stream = fanOutStream.MatchString(line)
		}
	}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := fanOutName.FindStringSubmatch(line + " "); m != nil {
			flush()
			devices, stream = 0, false
			replicas, _ = strconv.Atoi(m[2]) // 0 without
			result(line)
			continue
		}
		if devices == 0 && fanOutCounts.MatchString(line) {
			result(line) // the rest of a result line split by stderr
			continue
		}
		m := fanOutRoundLine.FindStringSubmatch(line)
		if m == nil || devices == 0 || (replicas == 0 && m[3] == "") {
			continue
		}
		if m[1] == "0" {
			block = block[:0] // the rounds so far were a warm-up run
		}
		all, _ := strconv.ParseFloat(m[2], 64)
		written, _ := strconv.ParseFloat(m[3], 64)
		block = append(block, FanOutRound{Devices: devices, AllMs: all, WrittenMs: written, Stream: stream, Replicas: replicas})
	}
	flush()
	return out
}

// joinJSONOutput turns a `go test -json` stream into the text it carries;
// anything else is returned as it is.
func joinJSONOutput(b []byte) []byte {
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		return b
	}
	var text bytes.Buffer
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var ev struct{ Action, Output string }
		if err := dec.Decode(&ev); err != nil {
			break
		}
		if ev.Action == "output" {
			text.WriteString(ev.Output)
		}
	}
	return text.Bytes()
}
