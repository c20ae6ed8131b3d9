package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()

	_, err := e.client("").Me(ctx)
	wantCode(t, err, 401, api.CodeUnauthorized)
	_, err = e.client("not-a-token").Clusters(ctx)
	wantCode(t, err, 401, api.CodeUnauthorized)

	// A gateway's enrollment token sees its node's map and nothing else.
	_, err = e.gateway("ky3", "n1").Clusters(ctx)
	ae := wantCode(t, err, 403, api.CodeForbidden)
	if !strings.Contains(ae.Message, "/v1/gateway") {
		t.Fatalf("message = %q", ae.Message)
	}
	m, err := e.gateway("ky3", "n2").GatewayMap(ctx, 0, 0)
	if err != nil || m.NodeID != "n2" || m.CID != "ky3" {
		t.Fatalf("gateway map = %+v, %v", m, err)
	}
	// Users and operator tokens have no gateway map.
	_, err = e.op.GatewayMap(ctx, 0, 0)
	wantCode(t, err, 403, api.CodeForbidden)

	// The operator token is not a sign-in: no devices.
	_, err = e.op.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "x", OS: "linux"})
	wantCode(t, err, 403, api.CodeForbidden)
	me, err := e.op.Me(ctx)
	if err != nil || !me.Operator || len(me.Accounts) != 1 || me.Accounts[0] != "rjwrn" {
		t.Fatalf("operator me = %+v, %v", me, err)
	}

	// A user sees their accounts' clusters only; another account's is 404.
	ada := e.signIn("ada@example.com")
	cs, err := ada.Clusters(ctx)
	if err != nil || len(cs) != 4 || cs[0].CID != "abc" || cs[1].CID != "ky3" || cs[1].Domain != "ky3.rjwrn.example.com" || cs[1].UserVPN != "wireguard" {
		t.Fatalf("clusters = %+v, %v", cs, err)
	}
	_, err = ada.Cluster(ctx, "zzz")
	wantCode(t, err, 404, api.CodeNotFound)
	_, err = e.client(otherToken).Cluster(ctx, "ky3")
	wantCode(t, err, 404, api.CodeNotFound)
	if d, err := e.client(otherToken).Cluster(ctx, "zzz"); err != nil || d.CID != "zzz" {
		t.Fatalf("other's operator token on its own cluster: %+v, %v", d, err)
	}
	_, err = ada.Cluster(ctx, "BAD!")
	wantCode(t, err, 400, api.CodeInvalid)

	// Operator verbs: bob is in the account but not an operator.
	bob := e.signIn("bob@example.com")
	if _, err := bob.Nodes(ctx, "ky3"); err != nil {
		t.Fatalf("bob reads nodes: %v", err)
	}
	_, err = bob.MovePlan(ctx, "ky3", "wg-ky3", "n2")
	ae = wantCode(t, err, 403, api.CodeForbidden)
	if !strings.Contains(ae.Message, "operator role on account rjwrn") {
		t.Fatalf("message = %q", ae.Message)
	}
	if _, err := ada.MovePlan(ctx, "ky3", "wg-ky3", "n2"); err != nil {
		t.Fatalf("ada (operator) plans a move: %v", err)
	}
	me, err = ada.Me(ctx)
	if err != nil || me.User != "ada@example.com" || !me.Operator || !me.ExpiresAt.Equal(t0.Add(24*time.Hour)) || me.SessionID == "" {
		t.Fatalf("me = %+v, %v", me, err)
	}

	// Errors are JSON with code and message, and 401s carry WWW-Authenticate.
	resp, err := e.ts.Client().Get(e.ts.URL + "/v1/me")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("401: %d %v", resp.StatusCode, resp.Header)
	}
	_, err = e.op.VPNService(ctx, "ky3", "nope", 0, 0)
	wantCode(t, err, 404, api.CodeNotFound)
	err = e.op.Do(ctx, http.MethodGet, "/v1/nothing", nil, nil)
	wantCode(t, err, 404, api.CodeNotFound)
}

func TestCheckPassword(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		email, pw string
		ok        bool
	}{{"ada@example.com", password, true}, {"Ada@Example.COM", password, true}, {"ada@example.com", "wrong", false}, {"nobody@example.com", password, false}} {
		ok, err := e.srv.CheckPassword(ctx, c.email, c.pw)
		if err != nil || ok != c.ok {
			t.Errorf("%s/%s: %v, %v; want %v", c.email, c.pw, ok, err, c.ok)
		}
	}
	tok, _, err := e.srv.CreateSession(ctx, "ADA@example.com", api.ClientCLI, "")
	if err != nil {
		t.Fatal(err)
	}
	if me, err := e.client(tok).Me(ctx); err != nil || me.User != "ada@example.com" || len(me.Accounts) != 1 {
		t.Fatalf("session of a differently cased email: %+v, %v", me, err)
	}
	if _, _, err := e.srv.CreateSession(ctx, "nobody@example.com", api.ClientCLI, ""); err == nil {
		t.Fatal("session for an unknown user")
	}
}

func TestSessionExpiryActsAtTheInstant(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SessionTTL = 2 * time.Minute; c.SessionRetention = 48 * time.Hour })
	ctx := context.Background()
	d := e.newDevice("ada@example.com", "laptop")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	gm, err := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0)
	if err != nil || gm.Serve == nil || len(gm.Serve.Peers) != 1 {
		t.Fatalf("gateway map = %+v, %v", gm, err)
	}
	dm, err := d.c.DeviceMap(ctx, d.dev.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon and the gateway hold their long-polls across the expiry.
	devPoll := poll(func() (*api.DeviceMap, error) { return d.c.DeviceMap(ctx, d.dev.ID, dm.Version, 300*time.Second) })
	gwPoll := poll(func() (*api.GatewayMap, error) {
		return e.gateway("ky3", "n1").GatewayMap(ctx, gm.Version, 300*time.Second)
	})
	e.waitWatchers(2)
	e.clk.Advance(2*time.Minute - time.Second)
	if e.hub.Watchers() != 2 {
		t.Fatal("a long-poll answered before the expiry")
	}
	e.clk.Advance(time.Second)
	_, err = recv(t, devPoll)
	wantCode(t, err, 401, api.CodeSessionExpired)
	gm2, err := recv(t, gwPoll)
	if err != nil || gm2.Version <= gm.Version || len(gm2.Serve.Peers) != 0 {
		t.Fatalf("gateway map after expiry = %+v, %v", gm2, err)
	}
	_, err = d.c.Me(ctx)
	ae := wantCode(t, err, 401, api.CodeSessionExpired)
	if !strings.Contains(ae.Message, "expired at") {
		t.Fatalf("message = %q", ae.Message)
	}
	// A new sign-in binds the device again and restores the peer.
	c2 := e.signIn("ada@example.com")
	if _, err := c2.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: d.dev.PublicKey, Name: "laptop", OS: "linux"}); err != nil {
		t.Fatal(err)
	}
	if gm3, _ := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0); len(gm3.Serve.Peers) != 1 {
		t.Fatalf("peer not back after sign-in: %+v", gm3.Serve)
	}
	// After the retention period the old session is forgotten: unauthorized.
	e.clk.Advance(49 * time.Hour) // c2 expires on the way; its timer forgets the first
	_, err = d.c.Me(ctx)
	wantCode(t, err, 401, api.CodeUnauthorized)
}

func TestEndSessionRemovesPeersAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d := e.newDevice("ada@example.com", "laptop")
	for _, cid := range []string{"ky3", "xym"} {
		if _, err := d.c.JoinCluster(ctx, d.dev.ID, cid); err != nil {
			t.Fatal(err)
		}
	}
	before := e.version()
	if err := d.c.EndSession(ctx); err != nil {
		t.Fatal(err)
	}
	if e.version() != before+1 {
		t.Fatalf("ending a session took %d changes, want one transaction", e.version()-before)
	}
	for _, g := range [][2]string{{"ky3", "n1"}, {"xym", "n1"}} {
		m, err := e.gateway(g[0], g[1]).GatewayMap(ctx, 0, 0)
		if err != nil || len(m.Serve.Peers) != 0 {
			t.Fatalf("%v after vpn down: %+v, %v", g, m.Serve, err)
		}
	}
	_, err := d.c.Me(ctx)
	ae := wantCode(t, err, 401, api.CodeUnauthorized)
	if !strings.Contains(ae.Message, "ended") {
		t.Fatalf("message = %q", ae.Message)
	}
	err = e.op.EndSession(ctx)
	wantCode(t, err, 403, api.CodeForbidden)
}

// Sessions that lapsed while control was down are acted on at start.
func TestExpiryCatchesUpAtStart(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.SessionTTL = time.Minute })
	ctx := context.Background()
	d := e.newDevice("ada@example.com", "laptop")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	e.srv.Close() // control is down; the clock moves on
	e.clk.Advance(2 * time.Minute)
	srv2, err := New(Config{Store: e.st, Hub: e.hub, Clock: e.clk, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	if err := srv2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := e.gateway("ky3", "n1").GatewayMap(ctx, 0, 0)
	if err != nil || len(m.Serve.Peers) != 0 {
		t.Fatalf("peers after a restart past the expiry: %+v, %v", m.Serve, err)
	}
	_, err = d.c.Me(ctx)
	wantCode(t, err, 401, api.CodeSessionExpired)
	_ = e.st.View(ctx, func(r store.Reader) error {
		dev, _ := r.Device(d.dev.ID)
		sess, err := r.Session(dev.SessionID)
		if err != nil || sess.State != model.SessionExpired {
			t.Errorf("session after start = %+v, %v; want it marked expired", sess, err)
		}
		return nil
	})
}
