package notify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/notify"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/sqlstore"
	"github.com/runos/vpn/internal/pgtest"
)

func TestPayload(t *testing.T) {
	c := notify.Change{Origin: "a1b2", Version: 42, Topics: []string{"cluster:ky3", "gateway:ky3/n1"}}
	p := notify.Payload(c)
	if p != "1 a1b2 42 cluster:ky3 gateway:ky3/n1" {
		t.Fatalf("payload %q", p)
	}
	got, err := notify.Parse(p)
	if err != nil || got.Origin != "a1b2" || got.Version != 42 || len(got.Topics) != 2 || got.Reread {
		t.Fatalf("parse = %+v, %v", got, err)
	}
	// Too many topics for one notification: the version alone.
	var many []string
	for i := range 2000 {
		many = append(many, fmt.Sprintf("device:dev-%012d", i))
	}
	p = notify.Payload(notify.Change{Origin: "a1b2", Version: 43, Topics: many})
	if len(p) > 8000 || !strings.HasSuffix(p, " *") {
		t.Fatalf("a big change's payload: %d bytes, %q…", len(p), p[:40])
	}
	if got, err := notify.Parse(p); err != nil || !got.Reread || got.Version != 43 || got.Topics != nil {
		t.Fatalf("parse of a reread = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "1", "1 a", "1 a x", "2 a 5 t", "1 a 0 t"} {
		if _, err := notify.Parse(bad); err == nil {
			t.Errorf("notify.Parse(%q) accepted", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("1 a1b2 42 cluster:ky3 gateway:ky3/n1")
	f.Add("1 a1b2 43 *")
	f.Add("1  \t 9")
	f.Fuzz(func(t *testing.T, p string) {
		c, err := notify.Parse(p)
		if err != nil {
			return
		}
		if c.Version == 0 || (c.Reread && c.Topics != nil) {
			t.Fatalf("notify.Parse(%q) = %+v", p, c)
		}
		if again, err := notify.Parse(notify.Payload(c)); err != nil || again.Version != c.Version || again.Origin != c.Origin || len(again.Topics) != len(c.Topics) {
			t.Fatalf("round trip of %+v: %+v, %v", c, again, err)
		}
	})
}

// replica is one replica's store, hub and listener.
type replica struct {
	st  *sqlstore.Postgres
	hub *hub.Hub
	l   *notify.Listener
}

func startReplica(t *testing.T, url string) *replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlstore.OpenPostgres(ctx, url, sqlstore.Options{AppName: "test-replica"})
	if err != nil {
		t.Fatal(err)
	}
	var global uint64
	var vs map[string]uint64
	_ = st.View(ctx, func(r store.Reader) error {
		global, _ = r.GlobalVersion()
		vs, _ = r.AllTopicVersions()
		return nil
	})
	r := &replica{st: st, hub: hub.New(global, vs)}
	r.l = notify.New(notify.Config{Connect: st.Conn, Store: st, Hub: r.hub, Origin: st.Origin()})
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); r.l.Run(ctx, func() { close(ready) }) }()
	t.Cleanup(func() { cancel(); <-done; st.Close() })
	<-ready
	return r
}

// commit makes a change touching topics on r and publishes it to r's own
// hub, as control's server does after each commit.
func (r *replica) commit(t *testing.T, topics ...string) store.Change {
	t.Helper()
	ch, err := r.st.Update(context.Background(), func(w store.Writer) error { w.Touch(topics...); return nil })
	if err != nil {
		t.Fatal(err)
	}
	r.hub.Publish(ch.Version, ch.Topics)
	return ch
}

// waitFor waits for the topic on h to reach version v, through a watch.
func waitFor(t *testing.T, h *hub.Hub, topic string, v uint64) {
	t.Helper()
	tp := h.Topic(topic)
	deadline := time.After(10 * time.Second)
	for {
		w := h.Watch(tp)
		if tp.Version() >= v {
			w.Stop()
			return
		}
		select {
		case <-w.C():
		case <-deadline:
			w.Stop()
			t.Fatalf("%s still at version %d, want %d", topic, tp.Version(), v)
		}
	}
}

// A change committed on one replica wakes the waiters of another within
// milliseconds; a replica's own changes are not published twice.
func TestChangesReachOtherReplicas(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	a, b := startReplica(t, url), startReplica(t, url)
	w := b.hub.Watch(b.hub.Topic("cluster:ky3"))
	start := time.Now()
	ch := a.commit(t, "cluster:ky3", "gateway:ky3/n1")
	select {
	case <-w.C():
	case <-time.After(10 * time.Second):
		t.Fatal("replica b not woken by a's change")
	}
	t.Logf("b woken %v after a's commit started", time.Since(start))
	if v := b.hub.Version("gateway:ky3/n1"); v != ch.Version {
		t.Fatalf("b's gateway:ky3/n1 at %d, want %d", v, ch.Version)
	}
	// a's own hub is not woken again by hearing its own change.
	wa := a.hub.Watch(a.hub.Topic("cluster:ky3"))
	defer wa.Stop()
	ch2 := b.commit(t, "device:d1")
	waitFor(t, a.hub, "device:d1", ch2.Version)
	select {
	case <-wa.C():
		t.Fatal("a woken on cluster:ky3 by its own change heard back")
	default:
	}
	// A change too big to tell topic by topic is read by the listeners.
	var many []string
	for i := range 1500 {
		many = append(many, fmt.Sprintf("device:dev-%08d", i))
	}
	ch3 := a.commit(t, many...)
	waitFor(t, b.hub, many[len(many)-1], ch3.Version)
	if v := b.hub.Version(many[0]); v != ch3.Version {
		t.Fatalf("first topic of a big change at %d on b, want %d", v, ch3.Version)
	}
}

// When the listening connection drops, the changes committed meanwhile
// are read back as soon as it listens again: nothing is missed.
func TestCatchUpAfterReconnect(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	a, b := startReplica(t, url), startReplica(t, url)
	ctx := context.Background()
	// Cut b's LISTEN connection and hold b off it: while a commits, the
	// notifications are lost to b.
	if _, err := a.st.Update(ctx, func(w store.Writer) error { return nil }); err != nil {
		t.Fatal(err)
	}
	kill := func() {
		conn, err := a.st.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()"); err != nil {
			t.Fatal(err)
		}
	}
	kill()
	var last store.Change
	for i := range 20 {
		last = a.commit(t, fmt.Sprintf("device:d%d", i), "cluster:ky3")
	}
	waitFor(t, b.hub, "cluster:ky3", last.Version)
	for i := range 20 {
		if v := b.hub.Version(fmt.Sprintf("device:d%d", i)); v == 0 {
			t.Fatalf("device:d%d missed by b", i)
		}
	}
	// The catch-up publishes before the listener says it is connected
	// (it is ready only once caught up): the hub can be a moment ahead.
	for deadline := time.Now().Add(5 * time.Second); !b.l.Connected(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("b's listener not connected 5 s after catching up")
		}
	}
}

// A database that goes away leaves the listener not connected (readyz
// says so) until it is back; then it catches up on its own.
func TestListenerSurvivesDatabaseRestart(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.NewDatabase(t)
	a, b := startReplica(t, url), startReplica(t, url)
	pg.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for b.l.Connected() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if b.l.Connected() {
		t.Fatal("listener still connected with the database stopped")
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	var ch store.Change
	for {
		var err error
		ch, err = a.st.Update(context.Background(), func(w store.Writer) error { w.Touch("cluster:ky3"); return nil })
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a cannot commit after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitFor(t, b.hub, "cluster:ky3", ch.Version)
}
