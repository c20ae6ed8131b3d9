package stream

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// visits counts its runs; block, when set, holds each run until closed.
type visits struct {
	n     *atomic.Int64
	wg    *sync.WaitGroup
	block chan struct{}
}

func (v visits) run() {
	if v.block != nil {
		<-v.block
	}
	v.n.Add(1)
	v.wg.Done()
}

func waitRuns(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not every visit ran", what)
	}
}

// Every added visit runs, whether the queue takes it or it overflows to a
// goroutine of its own, and however the workers come and go: the idle
// time is short enough that workers leave between and during the bursts.
func TestRunnerRunsEveryVisit(t *testing.T) {
	r := newRunner(8, 3, 50*time.Microsecond)
	var n atomic.Int64
	var wg sync.WaitGroup
	const bursts, each = 200, 50
	for b := range bursts {
		wg.Add(each)
		for range each {
			r.add(visits{n: &n, wg: &wg})
		}
		if b%10 == 0 {
			time.Sleep(time.Millisecond) // the workers go idle and leave
		}
	}
	waitRuns(t, &wg, "bursts")
	if got := n.Load(); got != bursts*each {
		t.Fatalf("%d runs, want %d", got, bursts*each)
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.workers.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if w := r.workers.Load(); w != 0 {
		t.Fatalf("%d workers left after the idle time", w)
	}
}

// A visit stuck in its write holds one worker, not the others' visits;
// with every worker stuck, what the queue cannot take still runs (on
// goroutines of its own) and what it took runs once a worker is free.
func TestRunnerStuckVisits(t *testing.T) {
	r := newRunner(2, 2, time.Second)
	var n atomic.Int64
	var stuck, free sync.WaitGroup
	block := make(chan struct{})
	stuck.Add(1)
	r.add(visits{n: &n, wg: &stuck, block: block})
	free.Add(20)
	for range 20 {
		r.add(visits{n: &n, wg: &free})
	}
	waitRuns(t, &free, "beside one stuck visit")
	stuck.Add(1)
	r.add(visits{n: &n, wg: &stuck, block: block})
	for len(r.q) > 0 { // both workers have taken a stuck visit
		time.Sleep(time.Millisecond)
	}
	n.Store(0)
	var queued sync.WaitGroup
	queued.Add(10)
	for range 10 {
		r.add(visits{n: &n, wg: &queued})
	}
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() < 8 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := n.Load(); got != 8 {
		t.Fatalf("with both workers stuck and room for 2 in the queue, %d of 10 visits ran, want 8", got)
	}
	close(block)
	waitRuns(t, &queued, "the queued ones once a worker is free")
	waitRuns(t, &stuck, "the stuck ones")
}

func TestSharedDeadline(t *testing.T) {
	d := sharedDeadline{timeout: time.Minute, every: time.Hour}
	a, b := d.context(), d.context()
	if a != b {
		t.Fatal("two visits within every got two contexts")
	}
	dl, ok := a.Deadline()
	if !ok || time.Until(dl) > time.Minute || time.Until(dl) < 59*time.Second {
		t.Fatalf("deadline %v (%v), want a minute from now", dl, ok)
	}
	d = sharedDeadline{timeout: 20 * time.Millisecond, every: 0}
	c := d.context()
	<-c.Done() // ends by itself
	if d.context() == c {
		t.Fatal("a context past every was given again")
	}
}
