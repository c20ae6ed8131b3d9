package control

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/internal/pgtest"
	"github.com/runos/vpn/internal/syncbuf"
)

// postTo sends POSTs to another host than the page came from: a browser
// whose form post a load balancer gives to another replica.
type postTo struct {
	host string
	base http.RoundTripper
}

func (p postTo) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		r = r.Clone(r.Context())
		r.URL.Host = p.host
	}
	return p.base.RoundTrip(r)
}

// Two replicas over one PostgreSQL database, as behind a load balancer:
// a login form served by one is accepted by the other, a change committed
// on one wakes a long-poll held by the other, both say they are ready, the
// database's password appears in no log, and while the database is down
// the API answers 503 "store unavailable" and readyz 503, then both resume
// without a restart.
func TestReplicasShareOnePostgres(t *testing.T) {
	pg := pgtest.Start(t)
	dbURL := strings.Replace(pg.NewDatabase(t), "postgres://postgres@", "postgres://postgres:s3cret-pw@", 1)
	dir := t.TempDir()
	certFile, keyFile, client := certFor(t, dir)
	seedFile := world(t, dir)
	var logs syncbuf.Buffer
	cfg := func(name, issuer string) Config {
		return Config{TLSCert: certFile, TLSKey: keyFile, Store: dbURL, Seed: seedFile, BcryptCost: 4, ReplicaName: name,
			Issuer: issuer, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	}
	u1, _ := run(t, cfg("r1", ""))
	c2 := cfg("r2", u1) // one public URL: the first's
	hubs := make(chan *hub.Hub, 1)
	c2.OnHub = func(h *hub.Hub) { hubs <- h }
	u2, _ := run(t, c2)
	hub2 := <-hubs
	ctx := context.Background()

	for _, u := range []string{u1, u2} {
		for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
			resp, err := client.Get(u + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != want {
				t.Fatalf("%s%s: %d %q", u, path, resp.StatusCode, b)
			}
		}
	}

	// The login form from r1, posted (and the code redeemed) at r2.
	h2, _ := url.Parse(u2)
	split := &http.Client{Transport: postTo{host: h2.Host, base: client.Transport}}
	o := &formOpener{ctx: ctx, client: split, errc: make(chan error, 1)}
	flow := &auth.Flow{Issuer: u1, ClientID: api.ClientCLI, HTTPClient: split, Opener: o, Out: io.Discard}
	tok, err := flow.SignInBrowser(ctx)
	if err != nil {
		t.Fatalf("form of r1 posted to r2: %v", err)
	}
	if err := <-o.errc; err != nil {
		t.Fatal(err)
	}
	ada1 := &api.Client{BaseURL: u1, Token: tok.AccessToken, HTTP: client}
	if me, err := ada1.Me(ctx); err != nil || me.User != user {
		t.Fatalf("session issued by r2, used at r1: %+v, %v", me, err)
	}

	// A long-poll held by r2 is answered by a change committed on r1.
	op1 := &api.Client{BaseURL: u1, Token: "operator-token-0123456789", HTTP: client}
	op2 := &api.Client{BaseURL: u2, Token: "operator-token-0123456789", HTTP: client}
	svc, err := op2.VPNService(ctx, "ky3", "wg-ky3", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		svc    *api.VPNService
		err    error
		header string
	}
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u2+"/v1/clusters/ky3/services/wireguard/wg-ky3?since="+
			strconv.FormatUint(svc.Version, 10)+"&wait=60", nil)
		req.Header.Set("Authorization", "Bearer operator-token-0123456789")
		resp, err := client.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		resp.Body.Close()
		s, err := op2.VPNService(ctx, "ky3", "wg-ky3", 0, 0)
		got <- answer{svc: s, err: err, header: resp.Header.Get("RunOS-Replica")}
	}()
	for hub2.Watchers() == 0 { // parked on r2
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if _, err := op1.SetNodeIngress(ctx, "ky3", "n1", api.NodeIngressRequest{IngressIP: "10.77.0.22"}); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || a.svc.Version <= svc.Version || a.header != "r2" {
		t.Fatalf("r2's long-poll after r1's change: %+v, %v, replica %q", a.svc, a.err, a.header)
	}
	t.Logf("r2's long-poll answered %v after r1's change", time.Since(start))

	// The database goes away: 503 store unavailable, not ready; then back.
	pg.Stop()
	_, err = op1.Clusters(ctx)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 503 || ae.Message != "store unavailable" {
		t.Fatalf("with the database down: %v", err)
	}
	if resp, err := client.Get(u2 + "/readyz"); err != nil || resp.StatusCode != 503 {
		t.Fatalf("readyz with the database down: %v %v", resp, err)
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, u := range []string{u1, u2} {
		for {
			resp, err := client.Get(u + "/readyz")
			if err == nil && resp.StatusCode == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not ready again: %v %v", u, resp, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if cs, err := op2.Clusters(ctx); err != nil || len(cs) != 1 {
		t.Fatalf("after the database came back: %+v, %v", cs, err)
	}
	if l := logs.String(); strings.Contains(l, "s3cret-pw") || !strings.Contains(l, "postgres://postgres:xxxxx@") {
		t.Fatalf("logs hold the database password or name no store:\n%s", l)
	}
}
