package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/auth/formlogin"
	"github.com/runos/vpn/control/server"
	"github.com/runos/vpn/internal/testcert"
)

// certFor makes a certificate for 127.0.0.1 and returns the files and a
// client that trusts it.
func certFor(t testing.TB, dir string) (certFile, keyFile string, client *http.Client) {
	t.Helper()
	tc := testcert.New(t)
	certFile, keyFile = filepath.Join(dir, "control.crt"), filepath.Join(dir, "control.key")
	tc.Write(t, certFile, keyFile)
	return certFile, keyFile, tc.Client()
}

const user, password = "ada@example.com", "correct horse battery"

func world(t testing.TB, dir string) string {
	w := api.World{
		Accounts: []api.WorldAccount{{AID: "rjwrn", OperatorToken: "operator-token-0123456789"}},
		Users:    []api.WorldUser{{Email: user, Password: password, Accounts: []string{"rjwrn"}, Operator: true}},
		Clusters: []api.WorldCluster{{CID: "ky3", AID: "rjwrn", Name: "tc3-ky3", DomainRoot: "example.com",
			Nodes:      []api.WorldNode{{NID: "n1", Roles: []string{"control-plane", "worker"}, IngressIP: "10.77.0.21", Published: true, EnrollmentToken: "enroll-n1-0123456789"}},
			VPNService: &api.WorldVPNService{ID: "wg-ky3", NodeID: "n1"}}},
	}
	b, _ := json.Marshal(w)
	p := filepath.Join(dir, "world.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// run starts control and returns its URL and a stop function that waits
// for Run to return.
func run(t testing.TB, cfg Config) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	if cfg.Issuer == "" {
		cfg.Issuer = "https://" + ln.Addr().String()
	}
	ready := make(chan string, 1)
	cfg.Ready = func(u string) { ready <- u }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	select {
	case <-ready:
		u := "https://" + ln.Addr().String()
		var once sync.Once
		var rerr error
		stop := func() error {
			once.Do(func() { cancel(); rerr = <-done })
			return rerr
		}
		t.Cleanup(func() { stop() })
		return u, stop
	case err := <-done:
		cancel()
		t.Fatalf("control did not start: %v", err)
	}
	return "", nil
}

type formOpener struct {
	ctx    context.Context
	client *http.Client
	errc   chan error
}

func (o *formOpener) Open(u string) error {
	go func() {
		_, err := formlogin.Login(o.ctx, o.client, u, user, password)
		o.errc <- err
	}()
	return nil
}

// TestRunSignInAndRestart runs the real control: HTTPS, the world file, a
// browser sign-in through the real login page with PKCE (scripted), then a
// restart on the same database with the same world file, after which the
// session still works and nothing was imported twice.
func TestRunSignInAndRestart(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, client := certFor(t, dir)
	var logs strings.Builder
	var mu sync.Mutex
	cfg := Config{TLSCert: certFile, TLSKey: keyFile, DB: filepath.Join(dir, "control.db"), Seed: world(t, dir),
		SessionTTL: 2 * time.Hour, BcryptCost: 4,
		Logger: slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), nil))}
	var api1 *server.Server
	cfg1 := cfg
	cfg1.Serving = func(s *server.Server) { api1 = s }
	url, stop := run(t, cfg1)
	ctx := context.Background()

	o := &formOpener{ctx: ctx, client: client, errc: make(chan error, 1)}
	flow := &auth.Flow{Issuer: url, ClientID: api.ClientCLI, HTTPClient: client, Opener: o, Out: io.Discard}
	tok, err := flow.SignInBrowser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-o.errc; err != nil {
		t.Fatal(err)
	}
	if d := time.Until(tok.ExpiresAt); d < 119*time.Minute || d > 121*time.Minute {
		t.Fatalf("token expires in %s, want --session-ttl 2h", d)
	}
	c := &api.Client{BaseURL: url, Token: tok.AccessToken, HTTP: client}
	me, err := c.Me(ctx)
	if err != nil || me.User != user || !me.Operator {
		t.Fatalf("me = %+v, %v", me, err)
	}
	// A long-poll open across the shutdown is answered, not left hanging.
	cs, _ := c.Clusters(ctx)
	if len(cs) != 1 {
		t.Fatalf("clusters = %+v", cs)
	}
	gw := &api.Client{BaseURL: url, Token: "enroll-n1-0123456789", HTTP: client}
	gm, err := gw.GatewayMap(ctx, 0, 0)
	if err != nil || gm.Serve == nil {
		t.Fatalf("gateway map = %+v, %v", gm, err)
	}
	held := make(chan error, 1)
	go func() { _, err := gw.GatewayMap(ctx, gm.Version, 300*time.Second); held <- err }()
	waitFor(t, "the gateway's long-poll parked in control", func() bool { return api1.Parked() == 1 })
	if err := stop(); err != nil {
		t.Fatalf("Run after shutdown: %v", err)
	}
	select {
	case err := <-held:
		if err != nil { // answered with the map, unchanged: the client re-polls elsewhere
			t.Fatalf("the long-poll held across the shutdown ended with %v, want its answer", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a long-poll held the shutdown")
	}
	mu.Lock()
	log := logs.String()
	mu.Unlock()
	if !strings.Contains(log, `msg="runos-control serving" url=`+url) || !strings.Contains(log, "created=6 existing=0") {
		t.Fatalf("log:\n%s", log)
	}

	// Restart: same database, same world file.
	logs.Reset()
	url2, _ := run(t, cfg)
	c2 := &api.Client{BaseURL: url2, Token: tok.AccessToken, HTTP: client}
	if me, err := c2.Me(ctx); err != nil || me.User != user {
		t.Fatalf("session after restart: %+v, %v", me, err)
	}
	mu.Lock()
	log = logs.String()
	mu.Unlock()
	if !strings.Contains(log, "created=0 existing=6") {
		t.Fatalf("second import log:\n%s", log)
	}
	// The sign-in is in the audit log, from the address it came from.
	op := &api.Client{BaseURL: url2, Token: "operator-token-0123456789", HTTP: client}
	page, err := op.Audit(ctx, api.AuditQuery{Kind: "session.signed_in"})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Actor != user || page.Entries[0].Source != "127.0.0.1" {
		t.Fatalf("audit of the sign-in: %+v, %v", page, err)
	}
	// OAuth metadata names the issuer.
	resp, err := client.Get(url2 + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md map[string]any
	json.NewDecoder(resp.Body).Decode(&md)
	if md["issuer"] != url2 {
		t.Fatalf("metadata = %v", md)
	}
}

// waitFor polls an observable state until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestConfigCheck(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "--db"},
		{Config{DB: "x"}, "--tls-cert and --tls-key are required"},
		{Config{DB: "x", InsecureHTTP: true, TLSCert: "c"}, "not both"},
		{Config{DB: "x", InsecureHTTP: true, Issuer: "ftp://x"}, "--issuer"},
	} {
		if err := c.cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if err := (&Config{DB: "x", InsecureHTTP: true}).Check(); err != nil {
		t.Fatal(err)
	}
}

func TestIssuerFromListen(t *testing.T) {
	for listen, want := range map[string]string{
		":443": "https://localhost", "198.51.100.10:443": "https://198.51.100.10",
		"198.51.100.10:8443": "https://198.51.100.10:8443", "[::1]:443": "https://[::1]",
	} {
		if got := issuer(listen, false); got != want {
			t.Errorf("%s: %s, want %s", listen, got, want)
		}
	}
	if got := issuer(":8080", true); got != "http://localhost:8080" {
		t.Errorf("insecure: %s", got)
	}
}

// The world file holds passwords and tokens: one others can read is
// refused before anything is imported.
func TestRunRefusesWorldFileOthersCanRead(t *testing.T) {
	dir := t.TempDir()
	p := world(t, dir)
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), Config{DB: filepath.Join(dir, "c.db"), InsecureHTTP: true, Seed: p, Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "--seed: "+p+" is readable by other users") || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunRefusesBadWorld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "world.json")
	os.WriteFile(p, []byte(`{"clusters":[{"cid":"X"}]}`), 0o600)
	err := Run(context.Background(), Config{DB: filepath.Join(dir, "c.db"), InsecureHTTP: true, Seed: p, Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), `invalid cid "X"`) {
		t.Fatalf("err = %v", err)
	}
}

// TestReplayedCodeEndsItsSession: an authorization code presented a second
// time is refused, and the session issued from its first use ends (RFC
// 6749 §4.1.2): whoever replays it may have stolen it, and so may have the
// token.
func TestReplayedCodeEndsItsSession(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, client := certFor(t, dir)
	url, _ := run(t, Config{TLSCert: certFile, TLSKey: keyFile, DB: filepath.Join(dir, "control.db"), Seed: world(t, dir), BcryptCost: 4})
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
	loopback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "signed in") }))
	defer loopback.Close()
	conf := &oauth2.Config{ClientID: api.ClientCLI, RedirectURL: loopback.URL + "/callback",
		Endpoint: oauth2.Endpoint{AuthURL: url + api.PathAuthorize, TokenURL: url + api.PathToken, AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	res, err := formlogin.Login(ctx, client, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), user, password)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := neturl.Parse(res.URL)
	code := u.Query().Get("code")
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	c := &api.Client{BaseURL: url, Token: tok.AccessToken, HTTP: client}
	if _, err := c.Me(ctx); err != nil {
		t.Fatalf("the first use's session: %v", err)
	}
	var re *oauth2.RetrieveError
	if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier)); !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("the code again: %v, want invalid_grant", err)
	}
	_, err = c.Me(ctx)
	if ae := (*api.Error)(nil); !errors.As(err, &ae) || ae.Status != 401 || !strings.Contains(ae.Message, "ended") {
		t.Fatalf("the first use's session after the replay: %v, want 401 ended", err)
	}
	// A code nobody ever had changes nothing.
	tok2 := signInCode(t, ctx, conf, client)
	if _, err := conf.Exchange(ctx, "never-issued", oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("an unknown code was accepted")
	}
	if _, err := (&api.Client{BaseURL: url, Token: tok2, HTTP: client}).Me(ctx); err != nil {
		t.Fatalf("another session after an unknown code: %v", err)
	}
}

// signInCode signs in through the login page and redeems the code.
func signInCode(t *testing.T, ctx context.Context, conf *oauth2.Config, client *http.Client) string {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	res, err := formlogin.Login(ctx, client, conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), user, password)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := neturl.Parse(res.URL)
	tok, err := conf.Exchange(ctx, u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}
