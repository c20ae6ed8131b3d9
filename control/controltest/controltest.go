// Package controltest runs a real runos-control in a test: control.Run on
// a loopback listener over HTTPS with a fresh certificate, a SQLite file in
// the test's directory and a small world file, with sign-ins through the
// real login page (auth/formlogin). It is for the tests of the packages
// that talk to control (the CLI, the console), not for production.
package controltest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/auth/formlogin"
	"github.com/runos/vpn/control"
	"github.com/runos/vpn/internal/syncbuf"
	"github.com/runos/vpn/internal/testcert"
)

// Password is every user's password in World.
const Password = "correct horse battery staple"

// Operator tokens of World's accounts.
const (
	OperatorToken = "operator-token-rjwrn-0123456789"
	OtherToken    = "operator-token-other-0123456789"
)

// World: account rjwrn with ky3 (n1 serving, n2) and xym; ops@ (operator)
// and dev@ (a plain user) in it; eve@ in account other.
func World() api.World {
	cpw := []string{api.RoleControlPlane, api.RoleWorker}
	return api.World{
		Accounts: []api.WorldAccount{{AID: "rjwrn", Name: "RunOS test", OperatorToken: OperatorToken}, {AID: "other", OperatorToken: OtherToken}},
		Users: []api.WorldUser{
			{Email: "ops@rjwrn.example.com", Password: Password, Accounts: []string{"rjwrn"}, Operator: true},
			{Email: "dev@rjwrn.example.com", Password: Password, Accounts: []string{"rjwrn"}},
			{Email: "eve@other.example.com", Password: Password, Accounts: []string{"other"}},
		},
		Clusters: []api.WorldCluster{
			{CID: "ky3", AID: "rjwrn", Name: "tc3-ky3", DomainRoot: "example.com", IsConfigured: true,
				Nodes: []api.WorldNode{
					{NID: "n1", Roles: cpw, IngressIP: "10.77.0.21", PublicIP: "198.51.100.21", Published: true, EnrollmentToken: "enroll-ky3-n1-0123456789"},
					{NID: "n2", Roles: []string{api.RoleWorker}, PublicIP: "198.51.100.22", Published: true, EnrollmentToken: "enroll-ky3-n2-0123456789"},
				},
				VPNService: &api.WorldVPNService{ID: "wg-ky3", Name: "vpn", NodeID: "n1"}},
			{CID: "xym", AID: "rjwrn", Name: "tc2-xym", DomainRoot: "example.com",
				Nodes:      []api.WorldNode{{NID: "n1", Roles: cpw, PublicIP: "198.51.100.31", Published: true, EnrollmentToken: "enroll-xym-n1-0123456789"}},
				VPNService: &api.WorldVPNService{ID: "wg-xym", NodeID: "n1"}},
		},
	}
}

// Control is a running control.
type Control struct {
	URL    string
	CAFile string
	Client *http.Client // trusts its certificate
	Dir    string
	Logs   *syncbuf.Buffer // control's log
}

// Start runs control with World until the test ends; mutate may change
// the configuration first.
func Start(t testing.TB, mutate ...func(*control.Config)) *Control {
	t.Helper()
	dir := t.TempDir()
	c := &Control{Dir: dir, Logs: &syncbuf.Buffer{}}
	certFile, keyFile := c.cert(t)
	b, _ := json.Marshal(World())
	seed := filepath.Join(dir, "world.json")
	if err := os.WriteFile(seed, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := control.Config{TLSCert: certFile, TLSKey: keyFile, DB: filepath.Join(dir, "control.db"), Seed: seed, BcryptCost: 4,
		Listener: ln, Issuer: "https://" + ln.Addr().String(), Logger: slog.New(slog.NewTextHandler(c.Logs, nil))}
	for _, m := range mutate {
		m(&cfg)
	}
	ready := make(chan string, 1)
	cfg.Ready = func(u string) { ready <- u }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- control.Run(ctx, cfg) }()
	select {
	case c.URL = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("control did not start: %v\n%s", err, c.Logs)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("control's log:\n%s", c.Logs)
		}
	})
	return c
}

// cert makes a certificate for 127.0.0.1 and writes it, the CA file.
func (c *Control) cert(t testing.TB) (certFile, keyFile string) {
	tc := testcert.New(t)
	certFile, keyFile = filepath.Join(c.Dir, "control.crt"), filepath.Join(c.Dir, "control.key")
	tc.Write(t, certFile, keyFile)
	c.CAFile, c.Client = certFile, tc.Client()
	return certFile, keyFile
}

// API is a control client with token.
func (c *Control) API(token string) *api.Client {
	return &api.Client{BaseURL: c.URL, Token: token, HTTP: c.Client}
}

// SignIn signs email in through the login page (PKCE, as the CLI does)
// and returns the access token.
func (c *Control) SignIn(t testing.TB, email string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := &FormOpener{Ctx: ctx, Client: c.Client, User: email, Password: Password, Errc: make(chan error, 1)}
	flow := &auth.Flow{Issuer: c.URL, ClientID: api.ClientCLI, HTTPClient: c.Client, Opener: o, Out: io.Discard}
	tok, err := flow.SignInBrowser(ctx)
	if err != nil {
		t.Fatalf("sign in %s: %v", email, err)
	}
	if err := <-o.Errc; err != nil {
		t.Fatalf("sign in %s: the login page: %v", email, err)
	}
	return tok.AccessToken
}

// FormOpener is an auth.Opener that signs in through the login page with
// the scripted browser.
type FormOpener struct {
	Ctx            context.Context
	Client         *http.Client
	User, Password string
	Errc           chan error
}

// Open signs in at u in the background; the result goes to Errc.
func (o *FormOpener) Open(u string) error {
	go func() {
		_, err := formlogin.Login(o.Ctx, o.Client, u, o.User, o.Password)
		o.Errc <- err
	}()
	return nil
}
