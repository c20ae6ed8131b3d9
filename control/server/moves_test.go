package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
)

// movingWorld: ky3 serving on n1 with key k1, devices joined, n2 heartbeating.
func movingWorld(t *testing.T, devices int, mutate ...func(*Config)) (*env, []*device, wgtypes.Key) {
	e := newEnv(t, mutate...)
	ctx := context.Background()
	var ds []*device
	for i := range devices {
		d := e.newDevice("ada@example.com", "laptop"+string(rune('a'+i)))
		if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	k1 := newKey(t)
	e.serve("ky3", "n1", k1)
	e.heartbeat("ky3", "n2")
	return e, ds, k1
}

func TestMoveEndToEnd(t *testing.T) {
	e, ds, k1 := movingWorld(t, 3)
	ctx := context.Background()

	// Each daemon holds its map long-poll.
	var maps []*api.DeviceMap
	var polls []chan polled[*api.DeviceMap]
	for _, d := range ds {
		m, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)
		if err != nil || m.Clusters[0].VPN.PublicKey != k1.PublicKey().String() {
			t.Fatalf("map before = %+v, %v", m, err)
		}
		maps = append(maps, m)
		polls = append(polls, poll(func() (*api.DeviceMap, error) { return d.c.DeviceMap(ctx, d.dev.ID, m.Version, 300*time.Second) }))
	}
	e.waitWatchers(len(ds))

	plan, err := e.op.MovePlan(ctx, "ky3", "wg-ky3", "n2")
	if err != nil || plan.Endpoint != "198.51.100.22:32768" || plan.AddressKind != api.AddressPublic || len(plan.Warnings) != 1 {
		t.Fatalf("plan = %+v, %v", plan, err)
	}
	mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil || mv.State != api.MovePreparing || mv.Endpoint != plan.Endpoint || len(mv.Warnings) != 1 ||
		!strings.Contains(mv.Warnings[0], "most routers will not route a public address back inside") {
		t.Fatalf("move = %+v, %v", mv, err)
	}
	follow := poll(func() (*api.Move, error) { return e.op.Move(ctx, mv.ID, mv.Version, 300*time.Second) })
	_, err = e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	wantCode(t, err, 409, api.CodeConflict)

	// The target stands by with every peer; the old node still serves.
	gw2 := e.gateway("ky3", "n2")
	m2, err := gw2.GatewayMap(ctx, 0, 0)
	if err != nil || m2.Serve == nil || m2.Serve.Role != api.GatewayStandby || m2.Serve.MoveID != mv.ID || len(m2.Serve.Peers) != 3 ||
		m2.Serve.Address != "100.100.1.1" {
		t.Fatalf("n2 map = %+v %+v, %v", m2, m2.Serve, err)
	}
	if m1, _ := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0); m1.Serve == nil || m1.Serve.Role != api.GatewayActive {
		t.Fatalf("n1 while preparing: %+v", m1.Serve)
	}
	// No device has been told anything yet.
	if e.hub.Watchers() < len(ds) {
		t.Fatal("a device's long-poll answered while the move was preparing")
	}
	// A stale report (the map before standby) does not switch.
	k2 := newKey(t)
	_ = gw2.GatewayReport(ctx, api.GatewayReport{PublicKey: k2.PublicKey().String(), ServiceID: "wg-ky3", Listening: true, MapVersion: m2.Version - 1})
	if got, _ := e.op.Move(ctx, mv.ID, 0, 0); got.State != api.MovePreparing {
		t.Fatalf("stale report switched the move: %s", got.State)
	}

	// n2 reports listening with its own key: every device is told at once.
	e.clk.Advance(40 * time.Millisecond)
	if err := gw2.GatewayReport(ctx, api.GatewayReport{PublicKey: k2.PublicKey().String(), ServiceID: "wg-ky3", Listening: true,
		ListenPort: 32768, MapVersion: m2.Version}); err != nil {
		t.Fatal(err)
	}
	for i, p := range polls {
		m, err := recv(t, p)
		if err != nil {
			t.Fatal(err)
		}
		v := m.Clusters[0].VPN
		if m.Version <= maps[i].Version || v.NodeID != "n2" || v.PublicKey != k2.PublicKey().String() || v.Endpoint != "198.51.100.22:32768" ||
			v.Address != "100.100.1.1" || v.Subnet != "100.100.1.0/24" || m.Device.Address != ds[i].dev.Address {
			t.Fatalf("device %d after the switch: %+v", i, m)
		}
	}
	got, err := recv(t, follow)
	if err != nil || got.State != api.MoveSwitching || got.Devices.Total != 3 || got.Devices.Switched != 0 {
		t.Fatalf("follow = %+v, %v", got, err)
	}
	if m1, _ := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0); m1.Serve == nil || m1.Serve.Role != api.GatewayDraining || m1.Serve.MoveID != mv.ID {
		t.Fatalf("n1 while switching: %+v", m1.Serve)
	}
	if m2, _ := gw2.GatewayMap(ctx, 0, 0); m2.Serve.Role != api.GatewayActive {
		t.Fatalf("n2 while switching: %+v", m2.Serve)
	}

	// Devices re-handshake; n2 reports them; the move counts them.
	e.clk.Advance(60 * time.Millisecond)
	hs := func(ds ...*device) []api.PeerHandshake {
		var out []api.PeerHandshake
		for _, d := range ds {
			out = append(out, api.PeerHandshake{PublicKey: d.dev.PublicKey, At: e.clk.Now()})
		}
		return out
	}
	report := func(h []api.PeerHandshake) {
		t.Helper()
		if err := gw2.GatewayReport(ctx, api.GatewayReport{PublicKey: k2.PublicKey().String(), ServiceID: "wg-ky3", Listening: true,
			MapVersion: m2.Version, Handshakes: h}); err != nil {
			t.Fatal(err)
		}
	}
	report(hs(ds[0], ds[1]))
	report(hs(ds[0])) // the same device again counts once
	got, _ = e.op.Move(ctx, mv.ID, 0, 0)
	if got.State != api.MoveSwitching || got.Devices.Switched != 2 {
		t.Fatalf("after two handshakes: %+v", got)
	}
	e.clk.Advance(100 * time.Millisecond)
	report(append(hs(ds[2]), api.PeerHandshake{PublicKey: newKey(t).PublicKey().String(), At: e.clk.Now()}))
	got, _ = e.op.Move(ctx, mv.ID, 0, 0)
	if got.State != api.MoveDone || got.Devices.Switched != 3 || got.SwitchMs != 200 || got.FinishedAt.IsZero() {
		t.Fatalf("done = %+v", got)
	}
	texts := make([]string, len(got.Steps))
	for i, s := range got.Steps {
		texts[i] = s.Text
	}
	all := strings.Join(texts, "\n")
	for _, want := range []string{"requested", "standby", "devices told", "3/3 devices switched", "n1 stops serving"} {
		if !strings.Contains(all, want) {
			t.Fatalf("steps lack %q:\n%s", want, all)
		}
	}
	// The old node serves nothing; the service is n2's.
	if m1, _ := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0); m1.Serve != nil {
		t.Fatalf("n1 after the move: %+v", m1.Serve)
	}
	svc, _ := e.op.VPNService(ctx, "ky3", "wg-ky3", 0, 0)
	if svc.NodeID != "n2" || svc.PublicKey != k2.PublicKey().String() || svc.State != api.ServiceServing || svc.Endpoint != "198.51.100.22:32768" {
		t.Fatalf("service after the move = %+v", svc)
	}
	nodes, _ := e.op.Nodes(ctx, "ky3")
	if nodes[0].HostsVPN || !nodes[1].HostsVPN {
		t.Fatalf("hostsVpn: %+v", nodes)
	}
}

func TestMoveFailsWhenTargetNeverReady(t *testing.T) {
	e, ds, k1 := movingWorld(t, 2)
	ctx := context.Background()
	before, _ := ds[0].c.DeviceMap(ctx, ds[0].dev.ID, 0, 0)
	svcBefore, _ := e.op.VPNService(ctx, "ky3", "wg-ky3", 0, 0)
	mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil || mv.State != api.MovePreparing {
		t.Fatalf("move = %+v, %v", mv, err)
	}
	e.clk.Advance(15 * time.Second)
	got, _ := e.op.Move(ctx, mv.ID, 0, 0)
	if got.State != api.MoveFailed || !strings.Contains(got.Error, "did not report the server listening within 15s") {
		t.Fatalf("move after 15 s = %+v", got)
	}
	after, _ := ds[0].c.DeviceMap(ctx, ds[0].dev.ID, 0, 0)
	if after.Version != before.Version || after.Clusters[0].VPN.PublicKey != k1.PublicKey().String() {
		t.Fatalf("a failed move changed a device map: %+v → %+v", before, after)
	}
	svc, _ := e.op.VPNService(ctx, "ky3", "wg-ky3", 0, 0)
	if svc.NodeID != "n1" || svc.PublicKey != svcBefore.PublicKey {
		t.Fatalf("service after a failed move = %+v", svc)
	}
	if m2, _ := e.gateway("ky3", "n2").GatewayMap(ctx, 0, 0); m2.Serve != nil {
		t.Fatalf("n2 still asked to serve: %+v", m2.Serve)
	}
	// A late ready report no longer switches anything.
	e.serveAnyway(t, "ky3", "n2")
	if svc, _ := e.op.VPNService(ctx, "ky3", "wg-ky3", 0, 0); svc.NodeID != "n1" {
		t.Fatal("a late report moved the service")
	}
}

func (e *env) serveAnyway(t *testing.T, cid, nid string) {
	_ = e.gateway(cid, nid).GatewayReport(context.Background(), api.GatewayReport{PublicKey: newKey(t).PublicKey().String(),
		ServiceID: "wg-ky3", Listening: true, MapVersion: 1 << 40})
}

func TestMoveToNodeWithoutHeartbeatFailsAtOnce(t *testing.T) {
	e, ds, _ := movingWorld(t, 1)
	ctx := context.Background()
	before, _ := ds[0].c.DeviceMap(ctx, ds[0].dev.ID, 0, 0)
	e.clk.Advance(30 * time.Second) // n2's last heartbeat is now 30 s old
	e.heartbeat("ky3", "n1")
	mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil || mv.State != api.MoveFailed || !strings.Contains(mv.Error, "no_heartbeat") || !strings.Contains(mv.Error, "no device was told anything") {
		t.Fatalf("move = %+v, %v", mv, err)
	}
	after, _ := ds[0].c.DeviceMap(ctx, ds[0].dev.ID, 0, 0)
	if after.Version != before.Version {
		t.Fatal("device map changed")
	}
	if m2, _ := e.gateway("ky3", "n2").GatewayMap(ctx, 0, 0); m2.Serve != nil {
		t.Fatalf("n2 asked to serve: %+v", m2.Serve)
	}
}

func TestMoveRefusals(t *testing.T) {
	e, _, _ := movingWorld(t, 1)
	ctx := context.Background()
	before := e.version()
	_, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n3")
	ae := wantCode(t, err, 409, api.CodeRefused)
	if !strings.Contains(ae.Message, "devices would be given no address") {
		t.Fatalf("message = %q", ae.Message)
	}
	_, err = e.op.StartMove(ctx, "ky3", "wg-ky3", "n1")
	wantCode(t, err, 409, api.CodeConflict)
	_, err = e.op.StartMove(ctx, "ky3", "wg-ky3", "n9")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = e.op.StartMove(ctx, "ky3", "wg-xym", "n2")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = e.op.StartMove(ctx, "ky3", "wg-ky3", "")
	wantCode(t, err, 400, api.CodeInvalid)
	if e.version() != before {
		t.Fatal("a refused move changed something")
	}
	// xym's service is not serving yet: nothing to move.
	_, err = e.op.StartMove(ctx, "xym", "wg-xym", "n1")
	wantCode(t, err, 409, api.CodeConflict)
}

func TestMoveDeadline(t *testing.T) {
	e, ds, _ := movingWorld(t, 2)
	ctx := context.Background()
	mv, _ := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	m2 := e.serve("ky3", "n2", newKey(t))
	if m2.Serve.Role != api.GatewayStandby {
		t.Fatalf("role = %s", m2.Serve.Role)
	}
	e.clk.Advance(time.Second)
	_ = e.gateway("ky3", "n2").GatewayReport(ctx, api.GatewayReport{PublicKey: newKey(t).PublicKey().String(), ServiceID: "wg-ky3", Listening: true,
		MapVersion: m2.Version, Handshakes: []api.PeerHandshake{{PublicKey: ds[0].dev.PublicKey, At: e.clk.Now()}}})
	e.clk.Advance(30 * time.Second)
	got, _ := e.op.Move(ctx, mv.ID, 0, 0)
	if got.State != api.MoveDone || got.Devices.Switched != 1 || got.Devices.Total != 2 || got.SwitchMs != 1000 {
		t.Fatalf("after the deadline = %+v", got)
	}
	if m1, _ := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0); m1.Serve != nil {
		t.Fatalf("n1 still serving after the deadline: %+v", m1.Serve)
	}
}

func TestMoveTimersSurviveRestart(t *testing.T) {
	e, _, _ := movingWorld(t, 1)
	ctx := context.Background()
	mv, _ := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	// A second server on the same store (a restart) re-arms the ready timeout.
	srv2, err := New(Config{Store: e.st, Hub: e.hub, Clock: e.clk, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	if err := srv2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	e.clk.Advance(15 * time.Second)
	got, _ := e.op.Move(ctx, mv.ID, 0, 0)
	if got.State != api.MoveFailed {
		t.Fatalf("move after restart and timeout = %s", got.State)
	}
}
