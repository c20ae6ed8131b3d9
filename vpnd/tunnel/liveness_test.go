package tunnel

import (
	"testing"
	"time"
)

func TestTrackedObserve(t *testing.T) {
	t0 := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	tr := newTracked(t0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	tr.observe(at(1), 0, 148) // the initiation went out
	if !tr.lastRx.IsZero() || !tr.sentSince.Equal(at(1)) {
		t.Fatalf("after a send: %+v", tr)
	}
	if tr.probeDue(at(30)) {
		t.Error("probe due for a server never heard from")
	}
	tr.observe(at(2), 92, 148) // the response
	if !tr.lastRx.Equal(at(2)) || !tr.sentSince.IsZero() {
		t.Fatalf("after the answer: %+v", tr)
	}
	tr.observe(at(3), 92, 180) // a keepalive
	tr.observe(at(4), 92, 200) // more: the silence starts at the first send
	if !tr.sentSince.Equal(at(3)) {
		t.Errorf("sentSince %v, want the first send after the answer", tr.sentSince)
	}
	tr.observe(at(5), 120, 230) // both grew: taken as an answer then a send
	if !tr.lastRx.Equal(at(5)) || !tr.sentSince.Equal(at(5)) {
		t.Errorf("both grew: %+v", tr)
	}
	if tr.probeDue(at(9)) || !tr.probeDue(at(10)) {
		t.Error("probe not due exactly 5 s after the last answer")
	}
	tr.lastProbe = at(10)
	if tr.probeDue(at(14)) || !tr.probeDue(at(15)) {
		t.Error("probes not spaced 5 s apart while nothing answers")
	}
	// Re-created: the counters start again at 0 without counting as traffic.
	tr.asked(at(20))
	tr.observe(at(21), 0, 0)
	if !tr.lastRx.Equal(at(5)) || tr.rx != 0 || tr.tx != 0 {
		t.Errorf("after re-creating: %+v", tr)
	}
	tr.observe(at(22), 0, 148)
	tr.observe(at(22), 1000, 148)
	if !tr.lastRx.Equal(at(22)) {
		t.Errorf("the new peer's answer: %+v", tr)
	}
}
