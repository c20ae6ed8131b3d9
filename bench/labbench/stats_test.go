package labbench

import (
	"math"
	"testing"
	"time"
)

func TestQuantileNearestRank(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct {
		q, want float64
	}{{0, 1}, {0.1, 1}, {0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}, {-1, 1}, {2, 10}} {
		if got := Quantile(s, c.q); got != c.want {
			t.Errorf("Quantile(1..10, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("the quantile of nothing is not NaN")
	}
	// Twenty samples: p99 is the worst, not an interpolation below it.
	var twenty []float64
	for i := range 20 {
		twenty = append(twenty, float64(i+1))
	}
	if got := Quantile(twenty, 0.99); got != 20 {
		t.Errorf("p99 of 20 samples = %v, want the max", got)
	}
}

func TestSummarize(t *testing.T) {
	in := []float64{30, 10, 20}
	s := Summarize(in)
	want := Summary{N: 3, Min: 10, P50: 20, P90: 30, P99: 30, Max: 30, Mean: 20}
	if s != want {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	if in[0] != 30 {
		t.Error("Summarize sorted its input in place")
	}
	if (Summarize(nil) != Summary{}) {
		t.Error("summary of nothing is not zero")
	}
}

func TestDurationsInMillis(t *testing.T) {
	s := SummarizeDurations([]time.Duration{1500 * time.Microsecond, 2 * time.Millisecond, 1234567 * time.Nanosecond})
	if s.Min != 1.234 || s.Max != 2 || s.P50 != 1.5 {
		t.Errorf("durations in ms: %+v", s)
	}
}
