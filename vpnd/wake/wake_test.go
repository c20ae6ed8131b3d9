package wake

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func TestDetector(t *testing.T) {
	d := Detector{Every: time.Second, Threshold: 3 * time.Second}
	wall, mono := t0, time.Duration(0)
	step := func(w, m time.Duration) (Sleep, bool) {
		wall, mono = wall.Add(w), mono+m
		return d.Observe(Reading{Wall: wall, Mono: mono})
	}
	if _, ok := d.Observe(Reading{Wall: wall, Mono: mono}); ok {
		t.Fatal("the first reading is a sleep")
	}
	// An hour of ticks on time, with a little scheduler jitter and an NTP
	// slew: nothing.
	for range 3600 {
		if s, ok := step(1010*time.Millisecond, time.Second+5*time.Millisecond); ok {
			t.Fatalf("sleep %v while ticking", s)
		}
	}
	// A suspend of 8 hours: the wall clock jumps, the monotonic one does not.
	s, ok := step(8*time.Hour, time.Second)
	if !ok || s.Duration() != 8*time.Hour || !s.To.Equal(wall) {
		t.Fatalf("suspend: %v %v", s, ok)
	}
	// The process held still (SIGSTOP) for 190 s: both clocks jump.
	s, ok = step(190*time.Second, 190*time.Second)
	if !ok || s.Duration() != 190*time.Second {
		t.Fatalf("held: %v %v", s, ok)
	}
	// A tick 3 s late is still within the threshold.
	if _, ok := step(4*time.Second, 4*time.Second); ok {
		t.Fatal("a tick 3 s late counted as a sleep")
	}
	// The wall clock set back (a manual correction) is no sleep.
	if _, ok := step(-time.Hour, time.Second); ok {
		t.Fatal("the wall clock going back counted as a sleep")
	}
}
