package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/store"
)

// TestGatewayRestartTellsDevices: the hosting gateway's start time, once it
// listens, is in every joined device's map (serverStartedAt); a gateway
// that starts again (same key) and listens changes it, so devices handshake
// at once; the same start again, or a start not yet listening, changes
// nothing.
func TestGatewayRestartTellsDevices(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key := newKey(t)
	m := e.serve("ky3", "n1", key)
	d := e.newDevice("ada@example.com", "laptop")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	gw := e.gateway("ky3", "n1")
	report := func(started time.Time, listening bool) {
		t.Helper()
		r := api.GatewayReport{PublicKey: key.PublicKey().String(), Version: "test", ServiceID: m.Serve.ServiceID,
			Listening: listening, ListenPort: m.Serve.Port, MapVersion: m.Version, StartedAt: started}
		if err := gw.GatewayReport(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	vpn := func() (uint64, api.VPNConfig) {
		t.Helper()
		dm, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)
		if err != nil || len(dm.Clusters) != 1 {
			t.Fatalf("map %+v %v", dm, err)
		}
		return dm.Version, dm.Clusters[0].VPN
	}
	first := t0.Add(-time.Minute)
	report(first, true)
	v1, c1 := vpn()
	if !c1.ServerStartedAt.Equal(first) || !c1.Ready {
		t.Fatalf("serverStartedAt %v, want %v", c1.ServerStartedAt, first)
	}
	report(first, true) // a heartbeat of the same run
	if v, _ := vpn(); v != v1 {
		t.Errorf("a heartbeat changed the device map (%d → %d)", v1, v)
	}
	second := t0.Add(time.Second)
	report(second, false) // started again, not serving yet
	if v, c := vpn(); v != v1 || !c.ServerStartedAt.Equal(first) {
		t.Errorf("a restart not yet listening told devices: %d %v", v, c.ServerStartedAt)
	}
	p := poll(func() (*api.DeviceMap, error) { return d.c.DeviceMap(ctx, d.dev.ID, v1, time.Minute) })
	report(second, true)
	dm, err := recv(t, p)
	if err != nil || dm.Version <= v1 || !dm.Clusters[0].VPN.ServerStartedAt.Equal(second) || dm.Clusters[0].VPN.PublicKey != c1.PublicKey {
		t.Fatalf("after the restart the long-poll answered %+v, %v", dm, err)
	}
	// A gateway that does not say when it started (an older one) changes nothing.
	report(time.Time{}, true)
	if v, c := vpn(); v != dm.Version || !c.ServerStartedAt.Equal(second) {
		t.Errorf("a report without startedAt: %d %v", v, c.ServerStartedAt)
	}
}

// restart stops control and starts it again over the same store after it
// was down for down (on the env's clock), as an outage would.
func (e *env) restart(down time.Duration) {
	e.t.Helper()
	e.srv.Close()
	e.ts.Close()
	e.clk.Advance(down)
	var g uint64
	var vs map[string]uint64
	_ = e.st.View(context.Background(), func(r store.Reader) error {
		g, _ = r.GlobalVersion()
		vs, _ = r.AllTopicVersions()
		return nil
	})
	e.hub = hub.New(g, vs)
	srv, err := New(Config{Store: e.st, Hub: e.hub, Clock: e.clk, Logger: testLogger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.srv = srv
	e.ts = httptest.NewTLSServer(srv.Handler())
	e.t.Cleanup(func() { srv.Close(); e.ts.Close() })
	e.op = e.client(opToken)
}

// TestControlCountsItsOwnOutage: after control was down 45 s, its nodes
// stay ready for a full heartbeat window after it came up (their gateways
// could not report while it was down), and a move issued at once waits for
// the target's first report instead of failing.
func TestControlCountsItsOwnOutage(t *testing.T) {
	e, ds, _ := movingWorld(t, 1)
	ctx := context.Background()
	e.restart(45 * time.Second)
	ds[0].c = e.client(ds[0].c.Token) // the device reaches the new server
	status := func(nid string) string {
		t.Helper()
		ns, err := e.op.Nodes(ctx, "ky3")
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			if n.NID == nid {
				return n.Status
			}
		}
		t.Fatalf("no node %s", nid)
		return ""
	}
	if s1, s2 := status("n1"), status("n2"); s1 != api.NodeReady || s2 != api.NodeReady {
		t.Fatalf("right after the restart: n1 %s, n2 %s; want ready (control's own outage)", s1, s2)
	}
	if s3 := status("n3"); s3 != api.NodeNoHeartbeat {
		t.Errorf("n3 never reported: %s", s3)
	}
	before, err := ds[0].c.DeviceMap(ctx, ds[0].dev.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil || mv.State != api.MovePreparing {
		t.Fatalf("a move right after the restart: %+v, %v", mv, err)
	}
	if !strings.Contains(mv.Steps[len(mv.Steps)-1].Text, "waiting for its gateway's first report") {
		t.Errorf("steps %+v", mv.Steps)
	}
	// n2's gateway reconnects a few seconds later (its backoff) and brings
	// the server up: the move switches and the device is told.
	e.clk.Advance(8 * time.Second)
	gw2 := e.gateway("ky3", "n2")
	m2, err := gw2.GatewayMap(ctx, 0, 0)
	if err != nil || m2.Serve == nil || m2.Serve.Role != api.GatewayStandby {
		t.Fatalf("n2's map: %+v %v", m2, err)
	}
	k2 := newKey(t)
	if err := gw2.GatewayReport(ctx, api.GatewayReport{PublicKey: k2.PublicKey().String(), ServiceID: "wg-ky3", Listening: true,
		ListenPort: 32768, MapVersion: m2.Version}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.op.Move(ctx, mv.ID, 0, 0); got.State != api.MoveSwitching && got.State != api.MoveDone {
		t.Fatalf("after n2's report: %+v", got)
	}
	if after, err := ds[0].c.DeviceMap(ctx, ds[0].dev.ID, 0, 0); err != nil || after.Version == before.Version || after.Clusters[0].VPN.NodeID != "n2" {
		t.Fatalf("device not told: %+v %v", after, err)
	}
	// A full window after control came up, a node it has not heard from
	// since is no_heartbeat (n1 stopped reporting in this test).
	e.clk.Advance(22 * time.Second)
	if s1 := status("n1"); s1 != api.NodeNoHeartbeat {
		t.Errorf("a window after the restart, silent n1 is %s", s1)
	}
}

// TestMoveAfterRestartToADeadTargetSaysSo: within the grace a move to a
// node whose gateway never reports again fails at the prepare deadline,
// saying control has not heard from it since it started.
func TestMoveAfterRestartToADeadTargetSaysSo(t *testing.T) {
	e, _, _ := movingWorld(t, 1)
	ctx := context.Background()
	e.restart(45 * time.Second)
	mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil || mv.State != api.MovePreparing {
		t.Fatalf("move: %+v, %v", mv, err)
	}
	e.clk.Advance(16 * time.Second)
	got, _ := e.op.Move(ctx, mv.ID, 0, 0)
	if got.State != api.MoveFailed || !strings.Contains(got.Error, "has not reported since control started 15s ago (is it running?)") {
		t.Fatalf("move: %s %q", got.State, got.Error)
	}
}
