package benchplot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// FanOutRound is one round of BenchmarkMoveFanOut: how many devices held a
// long-poll (or, Stream, a push stream), and the time from the commit to
// the last device's answer and to control's last answer written.
type FanOutRound struct {
	Devices   int
	AllMs     float64
	WrittenMs float64
	Stream    bool
}

var (
	// BenchmarkMoveFanOut-2   5   992515951 ns/op   10001 conns ... 10000 devices ...
	fanOutResult = regexp.MustCompile(`^BenchmarkMoveFanOut\S*\s.*?\s(\d+) devices\b`)
	// ... 10000 devices ... 1.000 stream: a run with RUNOS_FANOUT_STREAM=1.
	fanOutStream = regexp.MustCompile(`\s1(\.0*)? stream\b`)
	// fanout_bench_test.go:267: round 0: all 795 ms, written 572 ms, p50 486 ms; ...
	fanOutRoundLine = regexp.MustCompile(`round (\d+): all ([\d.]+) ms, written ([\d.]+) ms`)
)

// ParseFanOut reads the rounds of every BenchmarkMoveFanOut in `go test`
// output, plain or -json (whose output events are joined first). A run's
// rounds follow its result line; the framework's warm-up runs come first
// (their round numbers start again at 0) and are dropped, as the
// benchmark's own summary drops them.
func ParseFanOut(b []byte) []FanOutRound {
	text := joinJSONOutput(b)
	var out, block []FanOutRound
	devices, stream := 0, false
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	flush := func() {
		out = append(out, block...)
		block = nil
	}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := fanOutResult.FindStringSubmatch(line); m != nil {
			flush()
			devices, _ = strconv.Atoi(m[1])
			stream = fanOutStream.MatchString(line)
			continue
		}
		if m := fanOutRoundLine.FindStringSubmatch(line); m != nil && devices > 0 {
			if m[1] == "0" {
				block = block[:0] // the rounds so far were a warm-up run
			}
			all, _ := strconv.ParseFloat(m[2], 64)
			written, _ := strconv.ParseFloat(m[3], 64)
			block = append(block, FanOutRound{Devices: devices, AllMs: all, WrittenMs: written, Stream: stream})
		}
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
