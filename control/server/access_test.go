package server

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/store"
)

// auditLog reads every audit entry of account aid, newest first.
func (e *env) auditLog(aid string) []audit.Entry {
	e.t.Helper()
	var es []audit.Entry
	err := e.st.View(context.Background(), func(r store.Reader) error {
		var err error
		es, err = r.AuditEntries(store.AuditFilter{AIDs: []string{aid}, Limit: 10_000})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return es
}

// expectEntries runs change and asserts it left exactly the audit entries
// of kinds (newest last), and nothing else.
func (e *env) expectEntries(aid string, change func(), kinds ...string) []audit.Entry {
	e.t.Helper()
	before := len(e.auditLog(aid))
	change()
	after := e.auditLog(aid)
	added := after[:len(after)-before]
	slices.Reverse(added)
	var got []string
	for _, a := range added {
		got = append(got, a.Kind)
	}
	if !slices.Equal(got, kinds) {
		e.t.Fatalf("audit entries %q, want %q: %+v", got, kinds, added)
	}
	return added
}

func TestScopingAcrossAccounts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ada := e.newDevice("ada@example.com", "ada-laptop")
	bob := e.newDevice("bob@example.com", "bob-laptop")
	eve := e.newDevice("eve@example.com", "eve-laptop")
	other := e.client(otherToken)

	ids := func(ds []api.DeviceDetail, err error) string {
		if err != nil {
			return err.Error()
		}
		var out []string
		for _, d := range ds {
			out = append(out, d.Name)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got := ids(e.op.Devices(ctx, api.DeviceQuery{})); got != "ada-laptop bob-laptop" {
		t.Errorf("rjwrn's devices = %q", got)
	}
	if got := ids(other.Devices(ctx, api.DeviceQuery{})); got != "eve-laptop" {
		t.Errorf("other's devices = %q", got)
	}
	if got := ids(bob.c.MyDevices(ctx)); got != "bob-laptop" {
		t.Errorf("bob's own devices = %q", got)
	}
	before := e.version()
	// Account other's operator sees nothing of rjwrn.
	_, err := other.Device(ctx, bob.dev.ID)
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.RevokeDevice(ctx, bob.dev.ID)
	wantCode(t, err, 404, api.CodeNotFound)
	wantCode(t, other.DeleteDevice(ctx, bob.dev.ID), 404, api.CodeNotFound)
	_, err = other.Devices(ctx, api.DeviceQuery{AID: "rjwrn"})
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.Devices(ctx, api.DeviceQuery{CID: "ky3"})
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.Sessions(ctx, "", "bob@example.com")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.EndUserSessions(ctx, "", "bob@example.com")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.EndUserSession(ctx, bob.sessionID(t))
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.Tokens(ctx, "rjwrn")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.RevokeToken(ctx, "rjwrn", "world-file")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.Audit(ctx, api.AuditQuery{AID: "rjwrn"})
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = other.Audit(ctx, api.AuditQuery{CID: "ky3"})
	wantCode(t, err, 404, api.CodeNotFound)
	// A plain user may not use the operator verbs, nor touch another's device.
	_, err = bob.c.RevokeDevice(ctx, ada.dev.ID)
	wantCode(t, err, 403, api.CodeForbidden)
	wantCode(t, bob.c.DeleteDevice(ctx, ada.dev.ID), 403, api.CodeForbidden)
	wantCode(t, bob.c.RemoveMyDevice(ctx, ada.dev.ID), 404, api.CodeNotFound)
	_, err = bob.c.Device(ctx, ada.dev.ID)
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = bob.c.Devices(ctx, api.DeviceQuery{})
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = bob.c.Sessions(ctx, "", "ada@example.com")
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = bob.c.Audit(ctx, api.AuditQuery{})
	wantCode(t, err, 403, api.CodeForbidden)
	_, err = bob.c.CreateToken(ctx, api.CreateTokenRequest{Name: "mine"})
	wantCode(t, err, 403, api.CodeForbidden)
	if e.version() != before {
		t.Fatal("a refused request changed something")
	}
	// Each account's log holds its own entries only.
	for aid, who := range map[string]string{"rjwrn": "ada@example.com bob@example.com", "other": "eve@example.com"} {
		var actors []string
		for _, en := range e.auditLog(aid) {
			if !slices.Contains(actors, en.Actor.Name) {
				actors = append(actors, en.Actor.Name)
			}
		}
		slices.Sort(actors)
		if got := strings.Join(actors, " "); got != who {
			t.Errorf("actors in %s's log: %q, want %q", aid, got, who)
		}
	}
	page, err := other.Audit(ctx, api.AuditQuery{})
	if err != nil || len(page.Entries) != 2 || page.Entries[0].Kind != audit.DeviceRegistered || page.Entries[0].Target != eve.dev.ID {
		t.Errorf("other's audit = %+v, %v", page, err)
	}
	// Your own device, shown to you.
	if d, err := bob.c.Device(ctx, bob.dev.ID); err != nil || d.State != api.DeviceActive {
		t.Errorf("bob's own device = %+v, %v", d, err)
	}
}

// sessionID is the id of the session the device's client signed in with.
func (d *device) sessionID(t *testing.T) string {
	t.Helper()
	me, err := d.c.Me(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return me.SessionID
}

func TestRevokeDevice(t *testing.T) {
	e, ds, _ := movingWorld(t, 2)
	ctx := context.Background()
	d, keep := ds[0], ds[1]
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "xym"); err != nil {
		t.Fatal(err)
	}
	e.serve("xym", "n1", newKey(t))
	// The gateways and the device hold their long-polls.
	var gws []chan polled[*api.GatewayMap]
	for _, g := range [][2]string{{"ky3", "n1"}, {"xym", "n1"}} {
		gw := e.gateway(g[0], g[1])
		m, err := gw.GatewayMap(ctx, 0, 0)
		if err != nil || !hasPeer(m, d.dev.PublicKey) {
			t.Fatalf("%s map before: %+v, %v", g, m, err)
		}
		gws = append(gws, poll(func() (*api.GatewayMap, error) { return gw.GatewayMap(ctx, m.Version, 300*time.Second) }))
	}
	dm, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	devPoll := poll(func() (*api.DeviceMap, error) { return d.c.DeviceMap(ctx, d.dev.ID, dm.Version, 300*time.Second) })
	e.waitWatchers(3)

	start := time.Now()
	var got *api.DeviceDetail
	entries := e.expectEntries("rjwrn", func() {
		got, err = e.op.RevokeDevice(ctx, d.dev.ID)
		if err != nil {
			t.Fatal(err)
		}
	}, audit.DeviceRevoked)
	for i, c := range gws {
		m, err := recv(t, c)
		if err != nil || hasPeer(m, d.dev.PublicKey) || !hasPeer(m, keep.dev.PublicKey) && i == 0 {
			t.Fatalf("gateway map after the revoke: %+v, %v", m, err)
		}
	}
	took := time.Since(start)
	t.Logf("revoke → both gateways' maps without the device: %s", took)
	if took > time.Second {
		t.Errorf("the gateways heard of the revoke after %s, want within a second", took)
	}
	_, err = recv(t, devPoll)
	ae := wantCode(t, err, 401, api.CodeDeviceRevoked)
	if !ae.At.Equal(t0) || !strings.Contains(ae.Message, "this device was removed") || !strings.Contains(ae.Hint, "runos vpn up") {
		t.Errorf("device's refusal = %+v", ae)
	}
	if got.State != api.DeviceRevoked || !got.RevokedAt.Equal(t0) || got.RevokedBy != "token world-file" || got.SessionID != "" {
		t.Errorf("revoked device = %+v", got)
	}
	if en := entries[0]; en.Target != d.dev.ID || en.Actor != audit.Token("world-file") ||
		!strings.Contains(en.Outcome, "session ses-") || !strings.Contains(en.Outcome, "off the gateways of ky3, xym") {
		t.Errorf("entry = %+v", en)
	}
	// The key is refused from then on, even with a fresh sign-in.
	c := e.signIn("ada@example.com")
	_, err = c.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: d.key.PublicKey().String(), Name: "again", OS: "linux"})
	ae = wantCode(t, err, 403, api.CodeDeviceRevoked)
	if !strings.Contains(ae.Message, "revoked at 2026-03-01T12:00:00Z by token world-file") {
		t.Errorf("register a revoked key: %v", ae)
	}
	// Revoking twice says so; the other device is untouched.
	_, err = e.op.RevokeDevice(ctx, d.dev.ID)
	wantCode(t, err, 409, api.CodeConflict)
	if m, err := keep.c.DeviceMap(ctx, keep.dev.ID, 0, 0); err != nil || len(m.Clusters) != 1 {
		t.Fatalf("the other device: %+v, %v", m, err)
	}
	// A device in use cannot be deleted; a revoked one can, freeing its address.
	err = e.op.DeleteDevice(ctx, keep.dev.ID)
	if ae := wantCode(t, err, 409, api.CodeConflict); !strings.Contains(ae.Hint, "runos devices revoke "+keep.dev.ID) {
		t.Errorf("delete in use: %v", ae)
	}
	e.expectEntries("rjwrn", func() {
		if err := e.op.DeleteDevice(ctx, d.dev.ID); err != nil {
			t.Fatal(err)
		}
	}, audit.DeviceDeleted)
	_, err = e.op.Device(ctx, d.dev.ID)
	wantCode(t, err, 404, api.CodeNotFound)
	if _, err := c.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "new key", OS: "linux"}); err != nil {
		t.Fatalf("a new key after the delete: %v", err)
	}
}

// A full pool: deleting a revoked device gives its address to the next.
func TestDeleteFreesTheAddress(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.DevicePool = mustPrefix("100.96.0.0/29") }) // .2 to .6
	ctx := context.Background()
	var ds []*device
	for i := range 5 {
		ds = append(ds, e.newDevice("ada@example.com", fmt.Sprintf("d%d", i)))
	}
	_, err := e.signIn("bob@example.com").RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "x", OS: "linux"})
	wantCode(t, err, 503, api.CodeUnavailable)
	if _, err := e.op.RevokeDevice(ctx, ds[2].dev.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.op.DeleteDevice(ctx, ds[2].dev.ID); err != nil {
		t.Fatal(err)
	}
	n := e.newDevice("bob@example.com", "next")
	if n.dev.Address != ds[2].dev.Address {
		t.Errorf("next device got %s, want the freed %s", n.dev.Address, ds[2].dev.Address)
	}
}

func hasPeer(m *api.GatewayMap, key string) bool {
	if m.Serve == nil {
		return false
	}
	for _, p := range m.Serve.Peers {
		if p.PublicKey == key {
			return true
		}
	}
	return false
}

func TestUserRemovesOwnDevice(t *testing.T) {
	e, ds, _ := movingWorld(t, 1)
	ctx := context.Background()
	d := ds[0]
	other := e.newDevice("ada@example.com", "desk")
	en := e.expectEntries("rjwrn", func() {
		if err := other.c.RemoveMyDevice(ctx, d.dev.ID); err != nil {
			t.Fatal(err)
		}
	}, audit.DeviceDeleted)
	if !strings.Contains(en[0].Outcome, "removed by its user") || en[0].Actor != audit.User("ada@example.com") {
		t.Errorf("entry = %+v", en[0])
	}
	_, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)
	wantCode(t, err, 401, api.CodeDeviceRevoked)
	if m, _ := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0); hasPeer(m, d.dev.PublicKey) {
		t.Error("the removed device is still a peer")
	}
	ds2, err := other.c.MyDevices(ctx)
	if err != nil || len(ds2) != 1 || ds2[0].ID != other.dev.ID {
		t.Errorf("own devices after the removal = %+v, %v", ds2, err)
	}
}

func TestDeviceLimit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.signIn("bob@example.com")
	var first *api.Device
	for i := range 20 {
		d, err := c.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: fmt.Sprintf("d%d", i), OS: "linux"})
		if err != nil {
			t.Fatalf("device %d: %v", i+1, err)
		}
		if first == nil {
			first = d
		}
	}
	before := e.version()
	_, err := c.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "d21", OS: "linux"})
	ae := wantCode(t, err, 409, api.CodeDeviceLimit)
	if ae.Message != "bob@example.com has 20 devices, the most one user may have (runos-control --max-devices-per-user 20)" ||
		ae.Hint != "remove one you no longer use: list them with `runos vpn devices`, then `runos vpn devices remove ID`" {
		t.Errorf("the 21st device: %q (%q)", ae.Message, ae.Hint)
	}
	if e.version() != before {
		t.Error("the refused device changed something")
	}
	// An existing device registers again; another user is not limited by bob.
	if _, err := c.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: first.PublicKey, Name: "again", OS: "linux"}); err != nil {
		t.Errorf("re-registering a device at the limit: %v", err)
	}
	e.newDevice("ada@example.com", "ada's")
	if err := c.RemoveMyDevice(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	// (That ended the session every device here was registered with.)
	if _, err := e.signIn("bob@example.com").RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "d21", OS: "linux"}); err != nil {
		t.Errorf("after removing one: %v", err)
	}
	// The limit is a setting.
	e2 := newEnv(t, func(c *Config) { c.MaxDevicesPerUser = 1 })
	e2.newDevice("bob@example.com", "one")
	_, err = e2.signIn("bob@example.com").RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "two", OS: "linux"})
	if ae := wantCode(t, err, 409, api.CodeDeviceLimit); !strings.Contains(ae.Message, "--max-devices-per-user 1") {
		t.Errorf("limit 1: %v", ae)
	}
}

func TestIdleDevicesAreDeleted(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.DevicePool = mustPrefix("100.96.0.0/29") }) // five addresses, .2 to .6
	ctx := context.Background()
	day := 24 * time.Hour
	quiet := e.newDevice("ada@example.com", "quiet")
	busy := e.newDevice("bob@example.com", "busy")
	if _, err := busy.c.JoinCluster(ctx, busy.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	k1 := newKey(t)
	e.serve("ky3", "n1", k1)
	// Both sessions lapse after a day; bob's device shakes hands on day 1.
	e.clk.Advance(day - time.Minute)
	if err := e.gateway("ky3", "n1").GatewayReport(ctx, api.GatewayReport{PublicKey: k1.PublicKey().String(), ServiceID: "wg-ky3",
		Listening: true, Handshakes: []api.PeerHandshake{{PublicKey: busy.dev.PublicKey, At: e.clk.Now()}}}); err != nil {
		t.Fatal(err)
	}
	dd, err := e.op.Device(ctx, busy.dev.ID)
	if err != nil || len(dd.Clusters) != 1 || !dd.Clusters[0].LastHandshake.Equal(e.clk.Now()) || !dd.LastHandshake.Equal(e.clk.Now()) {
		t.Fatalf("handshake recorded: %+v, %v", dd, err)
	}
	e.clk.Advance(2 * time.Minute) // both sessions expire
	if dd, _ := e.op.Device(ctx, quiet.dev.ID); dd.State != api.DeviceSignedOut {
		t.Fatalf("quiet after its session lapsed: %s", dd.State)
	}
	// The pool fills up (eve signs in on day 30, her sessions are live).
	e.clk.Set(t0.Add(30*day - time.Hour))
	for i := range 3 {
		e.newDevice("eve@example.com", fmt.Sprintf("eve%d", i))
	}
	_, err = e.signIn("eve@example.com").RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "x", OS: "linux"})
	wantCode(t, err, 503, api.CodeUnavailable)
	// Thirty days after its last sign of life (registered at t0) the quiet
	// device goes, by control, with its entry; the busy one stays a day longer.
	en := e.expectEntries("rjwrn", func() { e.clk.Set(t0.Add(30 * day)) }, audit.DeviceDeleted)
	if en[0].Target != quiet.dev.ID || en[0].Actor != audit.Control || !strings.Contains(en[0].Outcome, "address "+quiet.dev.Address+" freed") {
		t.Errorf("entry = %+v", en[0])
	}
	if _, err := e.op.Device(ctx, busy.dev.ID); err != nil {
		t.Fatalf("busy deleted early: %v", err)
	}
	// Its address goes to the next device.
	n := e.newDevice("eve@example.com", "next")
	if n.dev.Address != quiet.dev.Address {
		t.Errorf("next device got %s, want the freed %s", n.dev.Address, quiet.dev.Address)
	}
	e.clk.Advance(day)
	_, err = e.op.Device(ctx, busy.dev.ID)
	wantCode(t, err, 404, api.CodeNotFound)
	// Devices with a live session are never idle, however old.
	if ds, err := e.client(otherToken).Devices(ctx, api.DeviceQuery{}); err != nil || len(ds) != 4 {
		t.Errorf("eve's devices: %d, %v", len(ds), err)
	}
}

func TestIdleCleanupAfterRestart(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.DeviceIdleTTL = time.Hour })
	d := e.newDevice("ada@example.com", "gone")
	e.clk.Advance(25 * time.Hour) // expired, and idle past the TTL
	_, err := e.op.Device(context.Background(), d.dev.ID)
	wantCode(t, err, 404, api.CodeNotFound)
	// A server started later cleans up what fell due while it was down.
	d2 := e.newDevice("bob@example.com", "later")
	e.srv.Close()
	e.clk.Advance(26 * time.Hour)
	srv, err := New(Config{Store: e.st, Hub: e.hub, Clock: e.clk, Logger: testLogger(t), DeviceIdleTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = e.st.View(context.Background(), func(r store.Reader) error {
		if _, err := r.Device(d2.dev.ID); err == nil {
			t.Error("Start left an idle device")
		}
		return nil
	})
}

func TestEndUserSessions(t *testing.T) {
	e, ds, _ := movingWorld(t, 2) // two sessions of ada, each with a device on ky3
	ctx := context.Background()
	ss, err := e.op.Sessions(ctx, "", "ada@example.com")
	if err != nil || len(ss) != 2 || len(ss[0].Devices) != 1 || ss[0].Client != api.ClientCLI {
		t.Fatalf("sessions = %+v, %v", ss, err)
	}
	_, err = e.op.Sessions(ctx, "", "")
	wantCode(t, err, 400, api.CodeInvalid)
	first := ds[0].sessionID(t)
	en := e.expectEntries("rjwrn", func() {
		out, err := e.op.EndUserSession(ctx, first)
		if err != nil || !slices.Equal(out.Ended, []string{first}) || !slices.Equal(out.Devices, []string{ds[0].dev.ID}) {
			t.Fatalf("end one = %+v, %v", out, err)
		}
	}, audit.SessionEnded)
	if en[0].Target != first {
		t.Errorf("entry = %+v", en[0])
	}
	_, err = ds[0].c.DeviceMap(ctx, ds[0].dev.ID, 0, 0)
	wantCode(t, err, 401, api.CodeUnauthorized)
	_, err = e.op.EndUserSession(ctx, first)
	wantCode(t, err, 404, api.CodeNotFound)
	// All of them: the other device drops off the gateway.
	e.expectEntries("rjwrn", func() {
		out, err := e.op.EndUserSessions(ctx, "", "ADA@example.com")
		if err != nil || len(out.Ended) != 1 || out.Devices[0] != ds[1].dev.ID {
			t.Fatalf("end all = %+v, %v", out, err)
		}
	}, audit.SessionEnded)
	if m, _ := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0); m.Serve == nil || len(m.Serve.Peers) != 0 {
		t.Errorf("peers after ending every session: %+v", m.Serve)
	}
	_, err = e.op.EndUserSessions(ctx, "", "ada@example.com")
	wantCode(t, err, 404, api.CodeNotFound)
}

func TestDevicePoolNearlyFull(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.DevicePool = mustPrefix("100.96.0.0/28") // 14 addresses, from .2
		c.MaxDevicesPerUser = 100
	})
	ctx := context.Background()
	if d, _ := e.op.Cluster(ctx, "ky3"); d.DevicePool == nil || d.DevicePool.Size != 13 || d.DevicePool.Used != 0 || d.DevicePool.Warning != "" {
		t.Fatalf("empty pool = %+v", d.DevicePool)
	}
	c := e.signIn("ada@example.com")
	for range 12 {
		if _, err := c.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "d", OS: "linux"}); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := e.op.Cluster(ctx, "ky3")
	if d.DevicePool == nil || d.DevicePool.Used != 12 || !strings.Contains(d.DevicePool.Warning, "is nearly full (12 of 13 addresses in use)") {
		t.Fatalf("nearly full pool = %+v", d.DevicePool)
	}
	if d, _ := e.signIn("bob@example.com").Cluster(ctx, "ky3"); d.DevicePool != nil {
		t.Errorf("a plain user sees the shared pool: %+v", d.DevicePool)
	}
}

// A gateway's report writes only handshakes that are new.
func TestHandshakesWrittenOnce(t *testing.T) {
	e, ds, k1 := movingWorld(t, 1)
	ctx := context.Background()
	rep := api.GatewayReport{PublicKey: k1.PublicKey().String(), ServiceID: "wg-ky3", Listening: true,
		Handshakes: []api.PeerHandshake{{PublicKey: ds[0].dev.PublicKey, At: t0}}}
	gw := e.gateway("ky3", "n1")
	if err := gw.GatewayReport(ctx, rep); err != nil {
		t.Fatal(err)
	}
	v := e.version()
	if err := gw.GatewayReport(ctx, rep); err != nil {
		t.Fatal(err)
	}
	if e.version() != v {
		t.Error("the same handshake again changed something")
	}
	// A clock ahead of control's is taken as control's now.
	rep.Handshakes[0].At = t0.Add(time.Hour)
	if err := gw.GatewayReport(ctx, rep); err != nil {
		t.Fatal(err)
	}
	if d, _ := e.op.Device(ctx, ds[0].dev.ID); !d.Clusters[0].LastHandshake.Equal(t0) {
		t.Errorf("handshake from the future = %v", d.Clusters[0].LastHandshake)
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
