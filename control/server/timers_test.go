package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/internal/backoff"
)

// downStore is a store whose database can be made unreachable: while down,
// every read and change fails as a cut connection does.
type downStore struct {
	store.Store
	down   atomic.Bool
	failed atomic.Int64 // reads and changes refused so far
}

func (d *downStore) View(ctx context.Context, fn func(store.Reader) error) error {
	if d.down.Load() {
		d.failed.Add(1)
		return store.ErrUnavailable
	}
	return d.Store.View(ctx, fn)
}

func (d *downStore) Update(ctx context.Context, fn func(store.Writer) error) (store.Change, error) {
	if d.down.Load() {
		d.failed.Add(1)
		return store.Change{}, store.ErrUnavailable
	}
	return d.Store.Update(ctx, fn)
}

func withDownStore(ds **downStore) func(*Config) {
	return func(c *Config) {
		*ds = &downStore{Store: c.Store}
		c.Store = *ds
	}
}

// armed reports whether s has a timer with that key.
func (s *Server) armed(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timers[key] != nil
}

// A move's deadline that falls while the database is out of reach is not
// lost: the timer runs again a second later, and once the database is back
// the move finishes.
func TestMoveDeadlineRetriedWhileTheStoreIsDown(t *testing.T) {
	var ds *downStore
	e, devs, _ := movingWorld(t, 2, withDownStore(&ds))
	ctx := context.Background()
	mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil {
		t.Fatal(err)
	}
	m2 := e.serve("ky3", "n2", newKey(t))
	_ = e.gateway("ky3", "n2").GatewayReport(ctx, api.GatewayReport{PublicKey: newKey(t).PublicKey().String(), ServiceID: "wg-ky3", Listening: true,
		MapVersion: m2.Version, Handshakes: []api.PeerHandshake{{PublicKey: devs[0].dev.PublicKey, At: e.clk.Now()}}})
	if got, _ := e.op.Move(ctx, mv.ID, 0, 0); got.State != api.MoveSwitching {
		t.Fatalf("before the deadline: %s", got.State)
	}

	ds.down.Store(true)
	e.clk.Advance(30 * time.Second) // the deadline fires, and fails
	if ds.failed.Load() == 0 || !e.srv.armed("move-deadline:"+mv.ID) {
		t.Fatalf("the deadline with the store down: %d refused, armed again %v", ds.failed.Load(), e.srv.armed("move-deadline:"+mv.ID))
	}
	e.clk.Advance(timerRetry) // still down: armed again
	if !e.srv.armed("move-deadline:" + mv.ID) {
		t.Fatal("a second failure left the deadline unarmed")
	}
	ds.down.Store(false)
	e.clk.Advance(timerRetry)
	got, _ := e.op.Move(ctx, mv.ID, 0, 0)
	if got.State != api.MoveDone || got.Devices.Switched != 1 || got.Devices.Total != 2 {
		t.Fatalf("after the store came back: %s %+v", got.State, got.Devices)
	}
	if e.srv.armed("move-deadline:" + mv.ID) {
		t.Fatal("the deadline is still armed after it acted")
	}
}

// The ready timeout and an added service's install timeout are retried
// the same way.
func TestReadyAndInstallTimeoutsRetriedWhileTheStoreIsDown(t *testing.T) {
	var ds *downStore
	e, _, _ := movingWorld(t, 1, withDownStore(&ds))
	ctx := context.Background()
	mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil {
		t.Fatal(err)
	}
	ds.down.Store(true)
	e.clk.Advance(15 * time.Second)
	if !e.srv.armed("move-ready:" + mv.ID) {
		t.Fatal("the ready timeout is not armed again after failing on the store")
	}
	ds.down.Store(false)
	e.clk.Advance(timerRetry)
	if got, _ := e.op.Move(ctx, mv.ID, 0, 0); got.State != api.MoveFailed {
		t.Fatalf("after the store came back: %s", got.State)
	}

	svc, err := e.op.AddVPNService(ctx, "abc", api.AddVPNServiceRequest{Name: "wg", TargetNodeID: "n2", Port: 51820})
	if err != nil {
		t.Fatal(err)
	}
	ds.down.Store(true)
	e.clk.Advance(15 * time.Second)
	if !e.srv.armed("install:" + svc.ID) {
		t.Fatal("the install timeout is not armed again after failing on the store")
	}
	ds.down.Store(false)
	e.clk.Advance(timerRetry)
	if got, _ := e.op.VPNService(ctx, "abc", svc.ID, 0, 0); got.State != api.ServiceFailed {
		t.Fatalf("the added service after the store came back: %s", got.State)
	}
}

// A replica that takes the timers' lease while the database fails arms
// nothing at first; it tries again while it holds the lease, rather than
// holding it with every timer unarmed until the next takeover.
func TestTakeoverArmsOnceTheStoreAnswers(t *testing.T) {
	e, _, _ := movingWorld(t, 1)
	ctx := context.Background()
	mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil {
		t.Fatal(err)
	}
	ds := &downStore{Store: e.st}
	ds.down.Store(true)
	srv2, err := New(Config{Store: ds, Hub: e.hub, Clock: e.clk, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	e.srv.Close() // the holder goes
	l, err := e.st.TryLease(ctx, timersLease)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv2.leadUntilArmed(ctx, l, backoff.New(time.Millisecond, 5*time.Millisecond))
	}()
	for ds.failed.Load() < 3 { // it tried, and tries again
		time.Sleep(time.Millisecond)
	}
	if srv2.armed("move-ready:" + mv.ID) {
		t.Fatal("armed with the store down")
	}
	ds.down.Store(false)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still not armed 10 s after the store came back")
	}
	if !srv2.armed("move-ready:" + mv.ID) {
		t.Fatal("the move's ready timeout is not armed after the takeover")
	}
	e.clk.Advance(15 * time.Second)
	if got, _ := e.op.Move(ctx, mv.ID, 0, 0); got.State != api.MoveFailed {
		t.Fatalf("the move after the takeover and its timeout: %s", got.State)
	}
}
