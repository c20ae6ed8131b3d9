// Package benchplot draws the benchmarks' results as SVG plots with
// gonum.org/v1/plot: one plot next to each lab benchmark's JSON document
// (bench/results/lab-*.json → lab-*.svg), and the summary plots that
// docs/performance.md shows (bench/results/plots/), drawn from every
// document and every raw `go test` output in the results directory.
//
// It reads the documents as labbench writes them (a small local copy of
// their shape, so labbench can call it without an import cycle), the
// fan-out benchmarks' `go test` output, plain or -json, and
// BenchmarkMoveFanOutReplicas's own result files. It is not a benchmark
// runner and measures nothing itself.
package benchplot

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Doc is the part of a labbench result document the plots read.
type Doc struct {
	Benchmark string               `json:"benchmark"`
	StartedAt string               `json:"startedAt"`
	Params    map[string]any       `json:"params"`
	Samples   map[string][]float64 `json:"samples"`
	Machine   struct {
		Commit string `json:"commit"`
	} `json:"machine"`
	path string
}

// ReadDoc reads one result document.
func ReadDoc(path string) (*Doc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Doc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.Benchmark == "" {
		return nil, fmt.Errorf("%s: not a benchmark result (no \"benchmark\")", path)
	}
	d.path = path
	return &d, nil
}

// param is a numeric parameter of the run (0 when absent).
func (d *Doc) param(key string) float64 {
	if v, ok := d.Params[key].(float64); ok {
		return v
	}
	return 0
}

// SVGPath is where the plot of the document at path goes: beside it.
func SVGPath(path string) string { return strings.TrimSuffix(path, ".json") + ".svg" }

// RenderFile draws the plot of one result document next to it and returns
// its path; a benchmark without a plot of its own gives "".
func RenderFile(path string) (string, error) {
	d, err := ReadDoc(path)
	if err != nil {
		return "", err
	}
	p, err := docPlot(d)
	if err != nil || p == nil {
		return "", err
	}
	out := SVGPath(path)
	return out, p.save(out)
}

// docPlot is the plot of one document, nil for a benchmark without one.
func docPlot(d *Doc) (*figure, error) {
	switch d.Benchmark {
	case "lab-move-switch", "lab-move-switch-long-poll":
		return moveRunPlot(d)
	case "lab-connect":
		return connectPlot([]*Doc{d})
	case "lab-throughput":
		return throughputPlot([]*Doc{d})
	}
	return nil, nil
}

// Summary plot file names in the plots directory.
const (
	MoveSwitchSVG = "move-switch.svg"
	FanOutSVG     = "fanout.svg"
	// FanOutStreamsSVG compares push streams with long-polls, drawn when
	// RenderDir is given such runs, and with them the runs across control
	// replicas it is given.
	FanOutStreamsSVG = "fanout-streams.svg"
	ConnectSVG       = "connect.svg"
	ThroughputSVG    = "throughput.svg"
)

// RenderDir draws a plot beside every result document in dir (lab-*.json,
// not those in subdirectories: re-runs kept there are plotted on demand
// with RenderFile) and the summary plots into dir/plots, and returns the
// files written. Fan-out times come from dir's bench-*.json (`make
// bench`'s go test -json streams) and from the files matching fanOut's
// globs (raw `go test` output kept elsewhere): fanout.svg draws their
// long-polls; streams' globs (runs of both kinds, from one session) give
// fanout-streams.svg, and replicas' (BenchmarkMoveFanOutReplicas's output
// or RUNOS_FANOUT_JSON files) a median line on it per replica count. Each
// kind is read from its own files only: `make bench`'s stream has both
// benchmarks, and fanout.svg stays the one process's.
func RenderDir(dir string, fanOut, streams, replicas []string) ([]string, error) {
	var docs []*Doc
	var fanout []FanOutRound
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var fanFiles []string
	for _, e := range ents {
		name, p := e.Name(), filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
		case strings.HasPrefix(name, "lab-") && strings.HasSuffix(name, ".json"):
			d, err := ReadDoc(p)
			if err != nil {
				return nil, err
			}
			docs = append(docs, d)
		case strings.HasPrefix(name, "bench-") && strings.HasSuffix(name, ".json"):
			fanFiles = append(fanFiles, p)
		}
	}
	more, err := globAll(fanOut)
	if err != nil {
		return nil, err
	}
	if fanout, err = readFanOut(append(fanFiles, more...)); err != nil {
		return nil, err
	}
	fanout = slices.DeleteFunc(fanout, func(r FanOutRound) bool { return r.Stream || r.Replicas > 0 })
	streamFiles, err := globAll(streams)
	if err != nil {
		return nil, err
	}
	streamRounds, err := readFanOut(streamFiles)
	if err != nil {
		return nil, err
	}
	streamRounds = slices.DeleteFunc(streamRounds, func(r FanOutRound) bool { return r.Replicas > 0 })
	replicaFiles, err := globAll(replicas)
	if err != nil {
		return nil, err
	}
	replicaRounds, err := readFanOut(replicaFiles)
	if err != nil {
		return nil, err
	}
	streamRounds = append(streamRounds, slices.DeleteFunc(replicaRounds, func(r FanOutRound) bool { return r.Replicas == 0 })...)
	slices.SortFunc(docs, func(a, b *Doc) int { return strings.Compare(a.StartedAt, b.StartedAt) })
	var written []string
	for _, d := range docs {
		p, err := docPlot(d)
		if err != nil {
			return written, fmt.Errorf("%s: %w", d.path, err)
		}
		if p != nil {
			out := SVGPath(d.path)
			if err := p.save(out); err != nil {
				return written, err
			}
			written = append(written, out)
		}
	}
	plots := filepath.Join(dir, "plots")
	if err := os.MkdirAll(plots, 0o755); err != nil {
		return written, err
	}
	summaries := []struct {
		name string
		draw func() (*figure, error)
	}{
		{MoveSwitchSVG, func() (*figure, error) { return movePlot(byBenchmark(docs, "lab-move-switch")) }},
		{FanOutSVG, func() (*figure, error) { return fanOutPlot(fanout) }},
		{FanOutStreamsSVG, func() (*figure, error) { return fanOutStreamsPlot(streamRounds) }},
		{ConnectSVG, func() (*figure, error) { return connectPlot(latest(byBenchmark(docs, "lab-connect"))) }},
		{ThroughputSVG, func() (*figure, error) { return throughputPlot(latest(byBenchmark(docs, "lab-throughput"))) }},
	}
	for _, s := range summaries {
		p, err := s.draw()
		if err != nil {
			return written, fmt.Errorf("%s: %w", s.name, err)
		}
		if p == nil {
			continue // no data for it
		}
		out := filepath.Join(plots, s.name)
		if err := p.save(out); err != nil {
			return written, err
		}
		written = append(written, out)
	}
	return written, nil
}

// globAll is the files matching any of the globs.
func globAll(globs []string) ([]string, error) {
	var files []string
	for _, g := range globs {
		m, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("fan-out files %q: %w", g, err)
		}
		files = append(files, m...)
	}
	return files, nil
}

// readFanOut is the fan-out rounds of every file.
func readFanOut(files []string) ([]FanOutRound, error) {
	var rounds []FanOutRound
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r, err := parseFanOutFile(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rounds = append(rounds, r...)
	}
	return rounds, nil
}

func byBenchmark(docs []*Doc, name string) []*Doc {
	var out []*Doc
	for _, d := range docs {
		if d.Benchmark == name {
			out = append(out, d)
		}
	}
	return out
}

// latest keeps the newest document (they are sorted by start), as a list.
func latest(docs []*Doc) []*Doc {
	if len(docs) == 0 {
		return nil
	}
	return docs[len(docs)-1:]
}
