package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/store"
)

// joinAcks records what the server counts of joins' waits.
type joinAcks struct {
	noMetrics
	mu sync.Mutex
	n  map[string]int
}

func (m *joinAcks) JoinAcked(outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n[outcome]++
}

func (m *joinAcks) count(outcome string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[outcome]
}

type joinResult struct {
	cc  *api.ClusterConfig
	err error
}

func joinAsync(d *device, cid string) <-chan joinResult {
	ch := make(chan joinResult, 1)
	go func() {
		cc, err := d.c.JoinCluster(context.Background(), d.dev.ID, cid)
		ch <- joinResult{cc, err}
	}()
	return ch
}

// A join answers only after the serving gateway reported a map that holds
// the device: not while the gateway has yet to see it, not on a report of
// an older map, and at once on the report of the map with the device.
func TestJoinAnswersOnceTheGatewayHoldsTheDevice(t *testing.T) {
	acks := &joinAcks{n: map[string]int{}}
	e := newEnv(t, func(c *Config) { c.JoinAckTimeout = time.Minute; c.Metrics = acks })
	ctx := context.Background()
	key := newKey(t)
	m0 := e.serve("ky3", "n1", key)
	d := e.newDevice("bob@example.com", "laptop")
	gw := e.gateway("ky3", "n1")

	done := joinAsync(d, "ky3")
	// The gateway's long-poll returns the map with the device once the
	// join has committed: the join is now waiting for the gateway.
	m, err := gw.GatewayMap(ctx, m0.Version, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Serve == nil || len(m.Serve.Peers) != 1 || m.Serve.Peers[0].DeviceID != d.dev.ID {
		t.Fatalf("the gateway's map after the join: %+v", m.Serve)
	}
	report := func(v uint64) {
		t.Helper()
		if err := gw.GatewayReport(ctx, api.GatewayReport{PublicKey: key.PublicKey().String(), Version: "test",
			ServiceID: m.Serve.ServiceID, Listening: true, ListenPort: m.Serve.Port, MapVersion: v}); err != nil {
			t.Fatal(err)
		}
	}
	notYet := func(when string) {
		t.Helper()
		select {
		case r := <-done:
			t.Fatalf("the join answered %s (err %v)", when, r.err)
		default:
		}
	}
	notYet("before the gateway reported")
	report(m0.Version) // a heartbeat of the map before the join
	notYet("on a report of the map without the device")

	report(m.Version)
	select {
	case r := <-done:
		if r.err != nil || r.cc.VPN.Subnet == "" {
			t.Fatalf("join: %+v, %v", r.cc, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the join did not answer after the gateway's report of the map with the device")
	}
	if a, to := acks.count("acked"), acks.count("timeout"); a != 1 || to != 0 {
		t.Errorf("counted acked %d, timeout %d; want 1, 0", a, to)
	}

	// The same report again bumps nothing; a join already acknowledged
	// (the device is in the map the gateway reported) answers at once.
	before := e.version()
	report(m.Version)
	if e.version() != before {
		t.Error("the same report again bumped the version")
	}
	if r := <-joinAsync(d, "ky3"); r.err != nil {
		t.Fatal(r.err)
	}
	if a := acks.count("acked"); a != 2 {
		t.Errorf("counted acked %d after the second join, want 2", a)
	}
}

// A gateway that never acknowledges costs a join the bound, no more: the
// join still succeeds and the timeout is counted.
func TestJoinAnswersAfterTheBoundWithoutAnAck(t *testing.T) {
	acks := &joinAcks{n: map[string]int{}}
	e := newEnv(t, func(c *Config) { c.JoinAckTimeout = 50 * time.Millisecond; c.Metrics = acks })
	e.serve("ky3", "n1", newKey(t))
	d := e.newDevice("bob@example.com", "laptop")
	start := time.Now()
	r := <-joinAsync(d, "ky3")
	if r.err != nil || r.cc.VPN.Subnet == "" {
		t.Fatalf("join: %+v, %v", r.cc, r.err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("the join answered after %s, before the bound and with no ack", waited)
	}
	if a, to := acks.count("acked"), acks.count("timeout"); a != 0 || to != 1 {
		t.Errorf("counted acked %d, timeout %d; want 0, 1", a, to)
	}
}

// A gateway that no longer reports (its heartbeat is stale) is not waited
// for at all: no wait could help.
func TestJoinDoesNotWaitForASilentGateway(t *testing.T) {
	acks := &joinAcks{n: map[string]int{}}
	e := newEnv(t, func(c *Config) { c.JoinAckTimeout = time.Minute; c.Metrics = acks })
	e.serve("ky3", "n1", newKey(t))
	e.clk.Advance(31 * time.Second) // past the heartbeat timeout
	d := e.newDevice("bob@example.com", "laptop")
	if r := <-joinAsync(d, "ky3"); r.err != nil {
		t.Fatal(r.err)
	}
	if a, to := acks.count("acked"), acks.count("timeout"); a != 0 || to != 0 {
		t.Errorf("counted acked %d, timeout %d; want no wait", a, to)
	}
}

// During a move the target stands by with every peer and is switched to
// on its report of the map the move began with; a device joining after
// that map is answered only once both the serving node and the target
// hold it, so the switch cannot reach it before the target does.
func TestJoinDuringAMoveWaitsForTheTarget(t *testing.T) {
	acks := &joinAcks{n: map[string]int{}}
	e := newEnv(t, func(c *Config) { c.JoinAckTimeout = time.Minute; c.Metrics = acks })
	ctx := context.Background()
	k1, k2 := newKey(t), newKey(t)
	e.serve("ky3", "n1", k1)
	e.heartbeat("ky3", "n2")
	if mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2"); err != nil || mv.State != api.MovePreparing {
		t.Fatalf("move: %+v, %v", mv, err)
	}
	gw1, gw2 := e.gateway("ky3", "n1"), e.gateway("ky3", "n2")
	report := func(gw *api.Client, k wgtypes.Key, m *api.GatewayMap, listening bool) {
		t.Helper()
		if err := gw.GatewayReport(ctx, api.GatewayReport{PublicKey: k.PublicKey().String(), Version: "test",
			ServiceID: m.Serve.ServiceID, Listening: listening, ListenPort: m.Serve.Port, MapVersion: m.Version}); err != nil {
			t.Fatal(err)
		}
	}
	m1, err := gw1.GatewayMap(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := gw2.GatewayMap(ctx, 0, 0)
	if err != nil || m2.Serve == nil || m2.Serve.Role != api.GatewayStandby {
		t.Fatalf("n2's map while preparing: %+v, %v", m2, err)
	}
	report(gw1, k1, m1, true)
	report(gw2, k2, m2, false) // standing by, not listening yet: no switch

	d := e.newDevice("bob@example.com", "laptop")
	done := joinAsync(d, "ky3")
	if m1, err = gw1.GatewayMap(ctx, m1.Version, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	report(gw1, k1, m1, true)
	if m2, err = gw2.GatewayMap(ctx, m2.Version, 30*time.Second); err != nil || len(m2.Serve.Peers) != 1 {
		t.Fatalf("n2's map after the join: %+v, %v", m2, err)
	}
	select {
	case r := <-done:
		t.Fatalf("the join answered before the move's target reported the device (err %v)", r.err)
	default:
	}
	report(gw2, k2, m2, false)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the join did not answer after both gateways reported the device")
	}
	if a, to := acks.count("acked"), acks.count("timeout"); a != 2 || to != 0 {
		t.Errorf("counted acked %d, timeout %d; want 2, 0", a, to)
	}
}

// heldStore holds its writes while hold is set (a slow disk's fsync).
type heldStore struct {
	store.Store
	mu   sync.Mutex
	hold chan struct{} // nil: writes pass
}

func (h *heldStore) Update(ctx context.Context, fn func(store.Writer) error) (store.Change, error) {
	h.mu.Lock()
	g := h.hold
	h.mu.Unlock()
	if g != nil {
		<-g
	}
	return h.Store.Update(ctx, fn)
}

// A join on the replica the gateway reports to answers as the report
// arrives, not once the report is committed: its wait is for the gateway,
// not for the disk.
func TestJoinDoesNotWaitForTheReportsCommit(t *testing.T) {
	held := &heldStore{}
	e := newEnv(t, func(c *Config) {
		held.Store = c.Store
		c.Store = held
		c.JoinAckTimeout = time.Minute
	})
	ctx := context.Background()
	key := newKey(t)
	m0 := e.serve("ky3", "n1", key)
	d := e.newDevice("bob@example.com", "laptop")
	gw := e.gateway("ky3", "n1")
	done := joinAsync(d, "ky3")
	m, err := gw.GatewayMap(ctx, m0.Version, 30*time.Second) // the join has committed
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var once sync.Once
	letGo := func() {
		once.Do(func() {
			held.mu.Lock()
			held.hold = nil
			held.mu.Unlock()
			close(release)
		})
	}
	t.Cleanup(letGo) // a failure must not leave the report's handler held
	held.mu.Lock()
	held.hold = release
	held.mu.Unlock()
	reported := make(chan error, 1)
	go func() {
		reported <- gw.GatewayReport(ctx, api.GatewayReport{PublicKey: key.PublicKey().String(), Version: "test",
			ServiceID: m.Serve.ServiceID, Listening: true, ListenPort: m.Serve.Port, MapVersion: m.Version})
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
	case err := <-reported:
		t.Fatalf("the report was answered (%v) with its commit held", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the join waited for the report's commit")
	}
	letGo()
	if err := <-reported; err != nil {
		t.Fatal(err)
	}
}
