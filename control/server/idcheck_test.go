package server

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/oidc"
	"github.com/runos/vpn/internal/oidctest"
	"github.com/runos/vpn/internal/testcert"
)

const idpCallback = "https://control.example.com/oauth/oidc/callback"

// idpWorld is control's API with a real identity provider (oidctest) for
// account rjwrn, checked every 15 minutes of the fake clock.
type idpWorld struct {
	*env
	idp    *oidctest.Provider
	up     *oidc.Upstream
	client *http.Client // trusts the provider
}

func newIdPWorld(t *testing.T) *idpWorld {
	t.Helper()
	cert := testcert.New(t)
	idp := oidctest.Serve(t, cert, []oidctest.Client{{ID: "runos-control", Secret: "s3cret", RedirectURIs: []string{idpCallback}}},
		[]oidctest.User{{Email: "cleo@example.com", Password: "cleo-pw", Groups: []string{"oncall"}}})
	secret := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	up, err := oidc.New(context.Background(), oidc.Config{Issuer: idp.Issuer, ClientID: "runos-control", ClientSecretFile: secret},
		idpCallback, cert.Client())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.IdentityAccount, c.Identity = "rjwrn", up })
	for _, g := range []string{"oncall", "staff"} {
		if _, err := e.op.CreateGroup(context.Background(), "rjwrn", g); err != nil {
			t.Fatal(err)
		}
	}
	return &idpWorld{env: e, idp: idp, up: up, client: cert.Client()}
}

// signInThrough signs email in at the provider (its login form, as a
// browser) and takes the identity in as control's callback does.
func (w *idpWorld) signInThrough(email, password string) string {
	t := w.t
	t.Helper()
	authURL, pending := w.up.Start()
	b := *w.client
	b.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), idpCallback) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := b.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	login := resp.Request.URL.ResolveReference(&url.URL{Path: "/login/username"})
	resp, err = b.PostForm(login.String(), url.Values{"id": {resp.Request.URL.Query().Get("authRequestID")},
		"username": {email}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("the provider's login: %s, %v", resp.Status, err)
	}
	id, err := w.up.Finish(context.Background(), pending, loc.Query())
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.srv.SignInIdentity(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (w *idpWorld) groupsOf(email string) []string {
	w.t.Helper()
	gs, err := w.op.Groups(context.Background(), "rjwrn")
	if err != nil {
		w.t.Fatal(err)
	}
	var of []string
	for _, g := range gs {
		if slices.Contains(g.Members, email) {
			of = append(of, g.Name)
		}
	}
	return of
}

// auditOf is the newest audit entry of kind naming email.
func (w *idpWorld) auditOf(kind, email string) *api.AuditEntry {
	w.t.Helper()
	page, err := w.op.Audit(context.Background(), api.AuditQuery{AID: "rjwrn", Kind: kind})
	if err != nil {
		w.t.Fatal(err)
	}
	for _, e := range page.Entries {
		if strings.Contains(e.Target, email) {
			return &e
		}
	}
	return nil
}

func TestUserDisabledAtProviderLosesSessions(t *testing.T) {
	w := newIdPWorld(t)
	ctx := context.Background()
	email := w.signInThrough("cleo@example.com", "cleo-pw")
	dev := w.newDevice(email, "cleo-laptop")
	if got := w.groupsOf(email); !slices.Equal(got, []string{"oncall"}) {
		t.Fatalf("groups after sign-in: %v", got)
	}

	// A round while she is still there: the session stays, and the
	// groups follow the provider's.
	w.idp.AddUser(oidctest.User{Email: "cleo@example.com", Password: "cleo-pw", Groups: []string{"oncall", "staff"}})
	w.clk.Advance(15 * time.Minute)
	if _, err := dev.c.Me(ctx); err != nil {
		t.Fatalf("after a round with the user still at the provider: %v", err)
	}
	if got := w.groupsOf(email); !slices.Equal(got, []string{"oncall", "staff"}) {
		t.Fatalf("groups after a refresh: %v, want the provider's [oncall staff]", got)
	}

	// The provider is down for a round: it says nothing about her, and
	// her session stays (the round did ask: the provider counted it).
	w.idp.Down(true)
	w.clk.Advance(15 * time.Minute)
	w.idp.Down(false)
	if w.idp.Unanswered() == 0 {
		t.Fatal("no round asked the provider while it was down")
	}
	if _, err := dev.c.Me(ctx); err != nil {
		t.Fatalf("a round with the provider down ended the session: %v", err)
	}
	if e := w.auditOf(api.AuditSessionEnded, email); e != nil {
		t.Fatalf("a round with the provider down recorded %+v", e)
	}

	// Disabled at the provider: the next round ends her session, her
	// device leaves, the daemon is told why, the audit log says so.
	w.idp.DisableUser("cleo@example.com", true)
	w.clk.Advance(15 * time.Minute)
	_, err := dev.c.Me(ctx)
	if !api.IsCode(err, api.CodeUnauthorized) || !strings.Contains(err.Error(), "identity provider no longer accepts this sign-in") {
		t.Fatalf("after the user was disabled at the provider: %v, want 401 naming the provider", err)
	}
	e := w.auditOf(api.AuditSessionEnded, email)
	if e == nil || e.Actor != "control" || !strings.Contains(e.Outcome, "ended 1 session(s) of cleo@example.com: the identity provider no longer accepts") ||
		!strings.Contains(e.Outcome, dev.dev.ID) {
		t.Fatalf("audit entry of the ending: %+v", e)
	}

	// Enabled again, she signs in again and is checked again.
	w.idp.DisableUser("cleo@example.com", false)
	w.signInThrough("cleo@example.com", "cleo-pw")
	again := w.signIn(email)
	w.clk.Advance(15 * time.Minute)
	if _, err := again.Me(ctx); err != nil {
		t.Fatalf("a new sign-in after being enabled again: %v", err)
	}
}

// A provider that issued no refresh token cannot be asked again: the
// sign-in ends at the first round.
func TestNoRefreshTokenEndsTheSession(t *testing.T) {
	w := newIdPWorld(t)
	ctx := context.Background()
	email, err := w.srv.SignInIdentity(ctx, oidc.Identity{Subject: "dora", Email: "dora@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	c := w.signIn(email)
	if _, err := c.Me(ctx); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(15 * time.Minute)
	if _, err := c.Me(ctx); !api.IsCode(err, api.CodeUnauthorized) {
		t.Fatalf("a sign-in without a refresh token after a round: %v, want ended", err)
	}
	if e := w.auditOf(api.AuditSessionEnded, email); e == nil || !strings.Contains(e.Outcome, "no refresh token") {
		t.Fatalf("audit entry: %+v", e)
	}
	// A password user's sessions are never the provider's business.
	bob := w.signIn("bob@example.com")
	w.clk.Advance(15 * time.Minute)
	if _, err := bob.Me(ctx); err != nil {
		t.Fatalf("a password user after a round: %v", err)
	}
}
