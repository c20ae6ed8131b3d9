// Package labbench holds the lab-scale benchmarks of RunOS VPN: each one
// brings up a whole lab (lab.Up: control, gateways, laptops with their own
// daemons, in network namespaces) and measures what a user or an operator
// would wait for — a move's switch time on every laptop, `runos vpn
// connect` to peerUp and its floors, the daemon's memory, TCP throughput
// through the tunnel — and writes the samples and their summaries as JSON
// to bench/results/. The non-test code here is what the benchmarks share:
// summaries, the results document, a follower of a daemon's watch stream
// and the handshake probe.
package labbench

import (
	"math"
	"slices"
	"time"
)

// Summary describes a set of samples in milliseconds (durations) or in the
// samples' own unit (ratios, rates).
type Summary struct {
	N    int     `json:"n"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Quantile is the nearest-rank quantile q (0..1) of sorted samples: the
// smallest sample with at least q of them at or below it. With few
// samples the high quantiles are the maximum, which is what they honestly
// are (twenty moves have no p99 finer than their worst).
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	q = min(max(q, 0), 1)
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Summarize summarizes samples (any order; not modified).
func Summarize(samples []float64) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Summary{N: len(s), Min: s[0], P50: Quantile(s, 0.5), P90: Quantile(s, 0.9),
		P99: Quantile(s, 0.99), Max: s[len(s)-1], Mean: sum / float64(len(s))}
}

// Millis converts durations to milliseconds (with microsecond resolution).
func Millis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = Ms(d)
	}
	return out
}

// Ms is d in milliseconds, rounded to the microsecond.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// SummarizeDurations summarizes durations in milliseconds.
func SummarizeDurations(ds []time.Duration) Summary { return Summarize(Millis(ds)) }
