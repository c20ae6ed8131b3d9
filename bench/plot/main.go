// Command plot draws the benchmarks' SVG plots with gonum.org/v1/plot (see
// package benchplot): one beside each lab benchmark's JSON document and the
// summary plots in <dir>/plots that docs/performance.md shows. `make bench`
// runs it after the benchmarks.
//
//	go run ./bench/plot [-dir bench/results] [-fanout GLOB]... [-streams GLOB]... [-replicas GLOB]... [FILE.json ...]
//
// With files, only those documents get their plot.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/runos/vpn/bench/benchplot"
)

func main() {
	dir := flag.String("dir", "bench/results", "the results directory: a plot beside every lab-*.json, summary plots in DIR/plots")
	var fanOut, streams, replicas globs
	flag.Var(&fanOut, "fanout", "also read BenchmarkMoveFanOut rounds from the go test output files matching this glob (repeatable)")
	flag.Var(&streams, "streams", "draw push streams against long-polls from the BenchmarkMoveFanOut output files matching this glob (repeatable)")
	flag.Var(&replicas, "replicas", "add to the streams plot a median line per replica count from the BenchmarkMoveFanOutReplicas output or RUNOS_FANOUT_JSON files matching this glob (repeatable)")
	flag.Parse()
	if err := run(*dir, fanOut, streams, replicas, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

type globs []string

func (g *globs) String() string     { return fmt.Sprint([]string(*g)) }
func (g *globs) Set(v string) error { *g = append(*g, v); return nil }

func run(dir string, fanOut, streams, replicas, files []string) error {
	if len(files) > 0 {
		for _, f := range files {
			out, err := benchplot.RenderFile(f)
			if err != nil {
				return err
			}
			if out != "" {
				fmt.Println(out)
			}
		}
		return nil
	}
	written, err := benchplot.RenderDir(dir, fanOut, streams, replicas)
	for _, w := range written {
		fmt.Println(w)
	}
	return err
}
