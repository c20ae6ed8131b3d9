package api

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestStreamIdleLimit: four heartbeat periods and up to one more of
// jitter, with control's period when it says one and its default (15 s)
// when it does not or says nonsense.
func TestStreamIdleLimit(t *testing.T) {
	zero := func(int64) int64 { return 0 }
	top := func(n int64) int64 { return n - 1 }
	for _, c := range []struct {
		header string
		randN  func(int64) int64
		want   time.Duration
	}{
		{"15", zero, 60 * time.Second},
		{"15", top, 75*time.Second - 1},
		{"7", zero, 28 * time.Second},
		{"7", top, 35*time.Second - 1},
		{"", zero, DefaultStreamIdle},
		{"", top, DefaultStreamIdle + 15*time.Second - 1},
		{"0", zero, DefaultStreamIdle},
		{"-3", zero, DefaultStreamIdle},
		{"soon", zero, DefaultStreamIdle},
	} {
		if got := streamIdle(c.header, c.randN); got != c.want {
			t.Errorf("streamIdle(%q) = %s, want %s", c.header, got, c.want)
		}
	}
	if DefaultStreamIdle != 60*time.Second {
		t.Errorf("DefaultStreamIdle = %s, want 60s (four of control's default 15 s heartbeats)", DefaultStreamIdle)
	}
}

// TestStreamIdleSpreads: streams of one control draw their limits over a
// whole period, so a slow replica's streams that do time out do not all
// reconnect in the same second: 1,000 draws at a 15 s heartbeat stay
// within [60 s, 75 s) and fill every one of its 15 seconds.
func TestStreamIdleSpreads(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	seconds := map[int]int{}
	for range 1000 {
		d := streamIdle("15", r.Int64N)
		if d < 60*time.Second || d >= 75*time.Second {
			t.Fatalf("idle limit %s outside [60s, 75s)", d)
		}
		seconds[int(d/time.Second)]++
	}
	if len(seconds) != 15 {
		t.Fatalf("1,000 limits fell in %d distinct seconds, want all 15: %v", len(seconds), seconds)
	}
	for s, n := range seconds {
		if n > 150 { // 66.7 expected per second
			t.Errorf("%d of 1,000 limits in second %d: not spread", n, s)
		}
	}
}

// TestWatchWaitsOutThreeHeartbeats: a stream whose control announced a
// 1 s heartbeat and then says nothing is not given up after three seconds,
// as it was before issue 25, but after its idle limit (four to five), and
// the error says so.
func TestWatchWaitsOutThreeHeartbeats(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", StreamContentType)
		w.Header().Set(HeaderHeartbeat, "1")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // silent: no event, no heartbeat
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer ts.Close()
	c, err := NewClient(ts.URL, "tok", "", AllowHTTP(true))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.WatchDeviceMap(context.Background(), "d1", 0, func(*DeviceMap) error { return nil })
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "nothing from control for") {
		t.Fatalf("watch of a silent stream: %v, want the idle limit's error", err)
	}
	// A lower bound only: the timer cannot fire before the limit.
	if took < StreamIdlePeriods*time.Second {
		t.Fatalf("a silent stream was given up after %s, before %d heartbeats of 1 s", took, StreamIdlePeriods)
	}
}
