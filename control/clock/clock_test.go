package clock

import (
	"testing"
	"time"
)

func TestFakeRunsDueTimersInOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFake(start)
	var got []string
	c.AfterFunc(2*time.Second, func() { got = append(got, "b@"+c.Now().Sub(start).String()) })
	c.AfterFunc(time.Second, func() {
		got = append(got, "a@"+c.Now().Sub(start).String())
		// A timer scheduled by a timer that is due within the same Advance runs too.
		c.AfterFunc(500*time.Millisecond, func() { got = append(got, "c@"+c.Now().Sub(start).String()) })
	})
	stopped := c.AfterFunc(time.Second, func() { got = append(got, "never") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true then false")
	}
	c.Advance(3 * time.Second)
	want := []string{"a@1s", "c@1.5s", "b@2s"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if c.Now() != start.Add(3*time.Second) {
		t.Fatalf("now = %v", c.Now())
	}
	if c.Pending() != 0 {
		t.Fatalf("pending = %d", c.Pending())
	}
}
