package hub

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// watch registers for the topics named.
func watch(h *Hub, names ...string) *Watch {
	ts := make([]*Topic, len(names))
	for i, n := range names {
		ts[i] = h.Topic(n)
	}
	return h.Watch(ts...)
}

func closed(w *Watch) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func TestPublishWakesOnlyItsTopics(t *testing.T) {
	h := New(10, map[string]uint64{Cluster("ky3"): 7})
	if v := h.Version(Cluster("ky3"), Device("d1")); v != 7 {
		t.Fatalf("initial version = %d, want 7", v)
	}
	ky3 := watch(h, Device("d1"), Cluster("ky3"))
	xym := watch(h, Device("d2"), Cluster("xym"))
	h.Publish(11, []string{Cluster("ky3"), Gateway("ky3", "n1")})
	if !closed(ky3) {
		t.Fatal("watcher of cluster:ky3 not woken")
	}
	if closed(xym) {
		t.Fatal("watcher of cluster:xym woken by a ky3 change")
	}
	if v := h.Version(Device("d1"), Cluster("ky3")); v != 11 {
		t.Fatalf("version = %d, want 11", v)
	}
	if h.Global() != 11 {
		t.Fatalf("global = %d", h.Global())
	}
	// A woken watch is gone; the other is still registered until stopped.
	if n := h.Watchers(); n != 1 {
		t.Fatalf("watchers = %d, want 1", n)
	}
	xym.Stop()
	xym.Stop()
	ky3.Stop()
	if n := h.Watchers(); n != 0 {
		t.Fatalf("watchers after stop = %d", n)
	}
}

func TestTopicHandles(t *testing.T) {
	h := New(3, map[string]uint64{Device("a"): 3})
	a, b := h.Topic(Device("a")), h.Topic(Device("b"))
	if a != h.Topic(Device("a")) || a.Name() != Device("a") {
		t.Fatal("a topic's handle is not stable")
	}
	if a.Version() != 3 || b.Version() != 0 {
		t.Fatalf("versions = %d, %d; want 3, 0", a.Version(), b.Version())
	}
	h.Publish(5, []string{Device("b")})
	if b.Version() != 5 || Newest(a, b) != 5 || h.Version(Device("a"), Device("b")) != 5 || h.Version("nope") != 0 {
		t.Fatalf("after a publish: %d, %d, %d, %d", b.Version(), Newest(a, b), h.Version(Device("a"), Device("b")), h.Version("nope"))
	}
}

func TestStalePublishKeepsNewerVersion(t *testing.T) {
	h := New(0, nil)
	h.Publish(5, []string{Move("m1")})
	h.Publish(3, []string{Move("m1")})
	if v := h.Version(Move("m1")); v != 5 {
		t.Fatalf("version = %d, want 5", v)
	}
	if h.Global() != 5 {
		t.Fatalf("global = %d, want 5", h.Global())
	}
}

func TestOneWakeForManyTopics(t *testing.T) {
	h := New(0, nil)
	w := watch(h, Device("a"), Session("s"), Cluster("c"))
	h.Publish(1, []string{Device("a"), Session("s"), Cluster("c")}) // closes once, no panic
	if !closed(w) {
		t.Fatal("not woken")
	}
}

func TestConcurrentWatchersAllWoken(t *testing.T) {
	h := New(0, nil)
	const n = 1000
	var wg sync.WaitGroup
	ready := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := watch(h, Device(fmt.Sprint(i)), Cluster("ky3"))
			ready <- struct{}{}
			<-w.C()
		}()
	}
	for range n {
		<-ready
	}
	h.Publish(1, []string{Cluster("ky3")})
	wg.Wait()
	if h.Watchers() != 0 {
		t.Fatalf("watchers left: %d", h.Watchers())
	}
}

// Stop racing a publish that fires the same watch: each watch is taken out
// once and its channel closed at most once, whoever gets there first.
func TestStopRacingPublish(t *testing.T) {
	h := New(0, nil)
	for round := range 200 {
		ws := make([]*Watch, 50)
		for i := range ws {
			ws[i] = watch(h, Device(fmt.Sprint(i)), Cluster("ky3"))
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); h.Publish(uint64(round+1), []string{Cluster("ky3")}) }()
		go func() {
			defer wg.Done()
			for _, w := range ws {
				w.Stop()
			}
		}()
		wg.Wait()
		for _, w := range ws {
			w.Stop() // again: a no-op
		}
		if n := h.Watchers(); n != 0 {
			t.Fatalf("round %d: %d watchers left", round, n)
		}
	}
}

func BenchmarkPublishTo10000(b *testing.B) {
	h := New(0, nil)
	for b.Loop() {
		b.StopTimer()
		ws := make([]*Watch, 10000)
		for i := range ws {
			ws[i] = watch(h, Device(fmt.Sprint(i)), Cluster("ky3"))
		}
		b.StartTimer()
		h.Publish(h.Global()+1, []string{Cluster("ky3")})
	}
}

// TestFanOutEndsWithTheLastAnswer: a publish's fan-out is observed once,
// when the last watch it fired has answered; watches it did not fire and
// repeated answers do not count.
func TestFanOutEndsWithTheLastAnswer(t *testing.T) {
	h := New(0, nil)
	var got []time.Duration
	h.ObserveFanOut(func(d time.Duration) { got = append(got, d) })
	a, b, other := h.Watch(h.Topic("device:a")), h.Watch(h.Topic("device:b")), h.Watch(h.Topic("device:c"))
	h.Publish(1, []string{"device:a", "device:b"})
	<-a.C()
	<-b.C()
	a.Answered()
	a.Answered()
	other.Answered()
	if len(got) != 0 {
		t.Fatalf("observed %v before the last answer", got)
	}
	b.Answered()
	if len(got) != 1 || got[0] < 0 {
		t.Fatalf("observed %v, want one fan-out", got)
	}
	other.Stop()
}
