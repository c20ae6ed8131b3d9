package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/seed"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/sqlstore"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	opToken    = "operator-token-rjwrn-0123456789"
	otherToken = "operator-token-other-0123456789"
	password   = "correct horse battery"
)

func enroll(cid, nid string) string { return "enroll-" + cid + "-" + nid + "-0123456789" }

// testWorld: ky3 (n1 control plane with a private ingress, n2 public, n3
// with no address), xym, nb1 (NetBird), abc (no VPN yet), and zzz in an
// account nobody but eve sees.
func testWorld() api.World {
	node := func(cid, nid string, roles []string, ingress, public string, published bool) api.WorldNode {
		return api.WorldNode{NID: nid, Roles: roles, IngressIP: ingress, PublicIP: public, Published: published, EnrollmentToken: enroll(cid, nid)}
	}
	cpw := []string{api.RoleControlPlane, api.RoleWorker}
	wk := []string{api.RoleWorker}
	return api.World{
		Accounts: []api.WorldAccount{{AID: "rjwrn", OperatorToken: opToken}, {AID: "other", OperatorToken: otherToken}},
		Users: []api.WorldUser{
			{Email: "ada@example.com", Password: password, Accounts: []string{"rjwrn"}, Operator: true},
			{Email: "bob@example.com", Password: password, Accounts: []string{"rjwrn"}},
			{Email: "eve@example.com", Password: password, Accounts: []string{"other"}},
		},
		Clusters: []api.WorldCluster{
			{CID: "ky3", AID: "rjwrn", Name: "tc3-ky3", DomainRoot: "example.com", IsConfigured: true,
				Nodes: []api.WorldNode{
					node("ky3", "n1", cpw, "10.77.0.21", "198.51.100.21", true),
					node("ky3", "n2", wk, "", "198.51.100.22", false),
					node("ky3", "n3", wk, "", "", false),
				},
				VPNService: &api.WorldVPNService{ID: "wg-ky3", Name: "vpn", NodeID: "n1"}},
			{CID: "xym", AID: "rjwrn", Name: "tc2-xym", DomainRoot: "example.com", CustomDomains: []string{"apps.example.org"},
				Nodes:      []api.WorldNode{node("xym", "n1", cpw, "", "198.51.100.31", true)},
				VPNService: &api.WorldVPNService{ID: "wg-xym", NodeID: "n1"}},
			{CID: "nb1", AID: "rjwrn", Name: "netbird", DomainRoot: "example.com", UserVPN: api.UserVPNNetBird,
				Nodes: []api.WorldNode{node("nb1", "n1", cpw, "", "198.51.100.41", true)}},
			{CID: "abc", AID: "rjwrn", Name: "fresh", DomainRoot: "example.com",
				Nodes: []api.WorldNode{node("abc", "n1", cpw, "10.77.0.61", "", true), node("abc", "n2", wk, "", "198.51.100.62", true)}},
			{CID: "zzz", AID: "other", Name: "theirs", DomainRoot: "example.net",
				Nodes: []api.WorldNode{node("zzz", "n1", cpw, "", "203.0.113.9", true)}},
		},
	}
}

type env struct {
	t   testing.TB
	st  store.Store
	hub *hub.Hub
	srv *Server
	clk *clock.Fake
	ts  *httptest.Server
	op  *api.Client

	dbPath string // the SQLite file, for what no API does yet
}

func newEnv(t testing.TB, mutate ...func(*Config)) *env {
	t.Helper()
	return newEnvOf(t, testWorld(), mutate...)
}

// newEnvOf is newEnv on another world file.
func newEnvOf(t testing.TB, world api.World, mutate ...func(*Config)) *env {
	t.Helper()
	return newEnvAt(t, filepath.Join(t.TempDir(), "control.db"), world, mutate...)
}

// newEnvAt is newEnvOf on the SQLite file at dbPath, new or kept from an
// earlier env (a restart: the world is imported again, as control does).
func newEnvAt(t testing.TB, dbPath string, world api.World, mutate ...func(*Config)) *env {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	st, err := sqlstore.OpenSQLite(ctx, dbPath, sqlstore.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	services, _ := pool.NewServices(netip.MustParsePrefix("100.100.0.0/16"))
	if _, err := seed.Import(ctx, st, world, seed.Options{Services: services, BcryptCost: bcrypt.MinCost, Now: t0}); err != nil {
		t.Fatal(err)
	}
	var g uint64
	var vs map[string]uint64
	_ = st.View(ctx, func(r store.Reader) error {
		g, _ = r.GlobalVersion()
		vs, _ = r.AllTopicVersions()
		return nil
	})
	h := hub.New(g, vs)
	// The simulated gateways report only when a test says so: a join
	// waits for their acknowledgement only briefly (joinack_test.go sets
	// its own bound).
	cfg := Config{Store: st, Hub: h, Clock: clk, Logger: testLogger(t), JoinAckTimeout: 10 * time.Millisecond}
	for _, m := range mutate {
		m(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	e := &env{t: t, st: st, hub: h, srv: srv, clk: clk, ts: ts, dbPath: dbPath}
	e.op = e.client(opToken)
	return e
}

func (e *env) client(tok string) *api.Client {
	return &api.Client{BaseURL: e.ts.URL, Token: tok, HTTP: e.ts.Client()}
}

// signIn creates a session the way the OAuth server does.
func (e *env) signIn(email string) *api.Client {
	e.t.Helper()
	tok, _, err := e.srv.CreateSession(context.Background(), email, api.ClientCLI, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return e.client(tok)
}

func (e *env) gateway(cid, nid string) *api.Client { return e.client(enroll(cid, nid)) }

func (e *env) version() uint64 {
	var v uint64
	_ = e.st.View(context.Background(), func(r store.Reader) error {
		v, _ = r.GlobalVersion()
		return nil
	})
	return v
}

func newKey(t testing.TB) wgtypes.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// device is a simulated laptop: its key, its registration, its client.
type device struct {
	key wgtypes.Key
	c   *api.Client
	dev *api.Device
}

func (e *env) newDevice(email, name string) *device {
	e.t.Helper()
	c := e.signIn(email)
	k := newKey(e.t)
	d, err := c.RegisterDevice(context.Background(), api.RegisterDeviceRequest{PublicKey: k.PublicKey().String(), Name: name, OS: "linux"})
	if err != nil {
		e.t.Fatal(err)
	}
	return &device{key: k, c: c, dev: d}
}

// serve makes a node's gateway report its server listening for the
// service its map names, as runos-gateway does.
func (e *env) serve(cid, nid string, key wgtypes.Key) *api.GatewayMap {
	e.t.Helper()
	gw := e.gateway(cid, nid)
	m, err := gw.GatewayMap(context.Background(), 0, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	if m.Serve == nil {
		e.t.Fatalf("%s/%s: map asks to serve nothing", cid, nid)
	}
	err = gw.GatewayReport(context.Background(), api.GatewayReport{PublicKey: key.PublicKey().String(), Version: "test",
		ServiceID: m.Serve.ServiceID, Listening: true, ListenPort: m.Serve.Port, MapVersion: m.Version})
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) heartbeat(cid, nid string) {
	e.t.Helper()
	if err := e.gateway(cid, nid).GatewayReport(context.Background(), api.GatewayReport{Version: "test"}); err != nil {
		e.t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, status int, code string) *api.Error {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want %d %s", err, status, code)
	}
	if ae.Status != status || ae.Code != code {
		t.Fatalf("err = %d %s (%s), want %d %s", ae.Status, ae.Code, ae.Error(), status, code)
	}
	return ae
}

// result of a long-poll run in the background.
type polled[T any] struct {
	v   T
	err error
}

func poll[T any](f func() (T, error)) chan polled[T] {
	c := make(chan polled[T], 1)
	go func() {
		v, err := f()
		c <- polled[T]{v, err}
	}()
	return c
}

// waitWatchers waits until the hub holds n watchers (long-polls asleep).
func (e *env) waitWatchers(n int) {
	e.t.Helper()
	for i := 0; e.hub.Watchers() < n; i++ {
		if i > 5000 {
			e.t.Fatalf("long-polls asleep: %d, want %d", e.hub.Watchers(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func recv[T any](t *testing.T, c chan polled[T]) (T, error) {
	t.Helper()
	select {
	case r := <-c:
		return r.v, r.err
	case <-time.After(20 * time.Second):
		t.Fatal("long-poll did not answer")
		panic("unreachable")
	}
}

// raw sends body as it is and returns the status and error code.
func (e *env) raw(tok, method, path, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	if eb.Error == nil {
		return resp.StatusCode, ""
	}
	return resp.StatusCode, eb.Error.Code
}
