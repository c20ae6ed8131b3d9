package oidc

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/oidctest"
	"github.com/runos/vpn/internal/testcert"
)

const callback = "https://control.example.com/v1/oidc/callback"

// world is a real provider (zitadel/oidc's) over HTTPS with two users in
// different groups, and control's relying party at it.
type world struct {
	idp    *oidctest.Provider
	up     *Upstream
	client *http.Client // trusts the provider's certificate
}

func newWorld(t *testing.T, tweak func(*Config)) *world {
	t.Helper()
	cert := testcert.New(t)
	idp := oidctest.Serve(t, cert, []oidctest.Client{{ID: "runos-control", Secret: "s3cret-of-control", RedirectURIs: []string{callback}}},
		[]oidctest.User{
			{Email: "Ada@example.com", Password: "ada-pw", Groups: []string{"oncall", "staff"}},
			{Email: "carl@example.com", Password: "carl-pw", Groups: []string{"contractors"}},
		})
	secret := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secret, []byte("s3cret-of-control\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Issuer: idp.Issuer, ClientID: "runos-control", ClientSecretFile: secret, GroupsClaim: "groups"}
	if tweak != nil {
		tweak(&cfg)
	}
	up, err := New(context.Background(), cfg, callback, cert.Client())
	if err != nil {
		t.Fatal(err)
	}
	return &world{idp: idp, up: up, client: cert.Client()}
}

// signIn is the browser: it follows the redirect to the provider, fills
// in its login form, and stops at the redirect back to control, whose
// query it returns.
func (w *world) signIn(t *testing.T, authURL, email, password string) url.Values {
	t.Helper()
	b := *w.client
	b.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), callback) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := b.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Request.URL.Query().Get("authRequestID")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("the provider's login page: %s at %s", resp.Status, resp.Request.URL)
	}
	login := resp.Request.URL.ResolveReference(&url.URL{Path: "/login/username"})
	resp, err = b.PostForm(login.String(), url.Values{"id": {id}, "username": {email}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if resp.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(loc.String(), callback) {
		t.Fatalf("after the login form: %s, location %v", resp.Status, loc)
	}
	return loc.Query()
}

func TestSignInRefreshAndRemoval(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	authURL, pending := w.up.Start()
	q, _ := url.Parse(authURL)
	if q.Query().Get("code_challenge_method") != "S256" || q.Query().Get("code_challenge") == "" || q.Query().Get("nonce") != pending.Nonce {
		t.Fatalf("the redirect lacks PKCE or the nonce: %s", authURL)
	}
	id, err := w.up.Finish(ctx, pending, w.signIn(t, authURL, "ada@example.com", "ada-pw"))
	if err != nil {
		t.Fatal(err)
	}
	if id.Email != "ada@example.com" || !slices.Equal(id.Groups, []string{"oncall", "staff"}) || id.Subject == "" || id.RefreshToken == "" {
		t.Fatalf("signed in as %+v", id)
	}

	again, err := w.up.Refresh(ctx, id.RefreshToken)
	if err != nil {
		t.Fatalf("refresh of a user still at the provider: %v", err)
	}
	if again.RefreshToken == "" || again.RefreshToken == id.RefreshToken {
		t.Errorf("the provider rotates refresh tokens, got the same or none: %q", again.RefreshToken)
	}
	if again.Subject != id.Subject || !slices.Equal(again.Groups, id.Groups) {
		t.Errorf("refresh says %+v, sign-in said %+v", again, id)
	}
	// The rotated-out token is spent: a replay of it is refused.
	if _, err := w.up.Refresh(ctx, id.RefreshToken); !errors.Is(err, ErrGone) {
		t.Errorf("refresh with a spent token: %v, want ErrGone", err)
	}

	w.idp.RemoveUser("ada@example.com")
	if _, err := w.up.Refresh(ctx, again.RefreshToken); !errors.Is(err, ErrGone) {
		t.Fatalf("refresh after the user was removed at the provider: %v, want ErrGone", err)
	}
}

func TestGroupsClaimMapped(t *testing.T) {
	w := newWorld(t, nil)
	authURL, pending := w.up.Start()
	id, err := w.up.Finish(context.Background(), pending, w.signIn(t, authURL, "carl@example.com", "carl-pw"))
	if err != nil {
		t.Fatal(err)
	}
	if id.Email != "carl@example.com" || !slices.Equal(id.Groups, []string{"contractors"}) {
		t.Fatalf("signed in as %+v", id)
	}
}

// TestClaimsFromUserInfo: a provider whose ID tokens carry only the
// subject; the email and groups come from its userinfo endpoint.
func TestClaimsFromUserInfo(t *testing.T) {
	w := newWorld(t, nil)
	w.idp.LeanIDTokens(true)
	authURL, pending := w.up.Start()
	id, err := w.up.Finish(context.Background(), pending, w.signIn(t, authURL, "carl@example.com", "carl-pw"))
	if err != nil {
		t.Fatal(err)
	}
	if id.Email != "carl@example.com" || !slices.Equal(id.Groups, []string{"contractors"}) {
		t.Fatalf("signed in as %+v", id)
	}
}

func TestFinishRefusesAForeignCallback(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	authURL, pending := w.up.Start()
	q := w.signIn(t, authURL, "carl@example.com", "carl-pw")

	other := pending
	other.State = "not-the-state"
	if _, err := w.up.Finish(ctx, other, q); err == nil || !strings.Contains(err.Error(), "state differs") {
		t.Errorf("a callback of another sign-in: %v", err)
	}
	// The code without its PKCE verifier: the provider refuses it.
	other = pending
	first := "x" // a first character other than the verifier's own (1 in 64 was already "x")
	if pending.Verifier[0] == 'x' {
		first = "y"
	}
	other.Verifier = first + pending.Verifier[1:]
	if _, err := w.up.Finish(ctx, other, q); err == nil || !strings.Contains(err.Error(), "exchange the sign-in code") {
		t.Errorf("a code with the wrong verifier: %v", err)
	}
	if _, err := w.up.Finish(ctx, pending, url.Values{"error": {"access_denied"}, "state": {pending.State}}); err == nil || !strings.Contains(err.Error(), "access_denied") {
		t.Errorf("a refusal by the provider: %v", err)
	}
}

func TestWrongClientSecretIsNotAGoneUser(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	authURL, pending := w.up.Start()
	id, err := w.up.Finish(ctx, pending, w.signIn(t, authURL, "carl@example.com", "carl-pw"))
	if err != nil {
		t.Fatal(err)
	}
	w.up.oauth.ClientSecret = "rotated-away"
	if _, err := w.up.Refresh(ctx, id.RefreshToken); err == nil || errors.Is(err, ErrGone) {
		t.Errorf("refresh with control's wrong secret: %v; want an error that does not end the user's sessions", err)
	}
}

func TestGroupsFromNestedClaims(t *testing.T) {
	for _, c := range []struct {
		claim  string
		claims string
		want   []string
		err    bool
	}{
		{"groups", `{"groups":["a","b"]}`, []string{"a", "b"}, false},
		{"groups", `{"groups":"a"}`, []string{"a"}, false},
		{"groups", `{}`, nil, false},
		{"groups", `{"groups":null}`, nil, false},
		{"realm_access.roles", `{"realm_access":{"roles":["admin"]}}`, []string{"admin"}, false},
		{"realm_access.roles", `{"realm_access":"x"}`, nil, false},
		{"groups", `{"groups":[1]}`, nil, true},
		{"groups", `{"groups":{"a":1}}`, nil, true},
	} {
		u := &Upstream{cfg: Config{GroupsClaim: c.claim}}
		var m map[string]any
		if err := jsonUnmarshal(c.claims, &m); err != nil {
			t.Fatal(err)
		}
		got, err := u.groups(m)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("%s in %s = %v, %v", c.claim, c.claims, got, err)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	good := Config{Issuer: "https://idp.example.com/realms/team", ClientID: "runos"}
	if err := good.Check(); err != nil {
		t.Errorf("a good configuration: %v", err)
	}
	for _, c := range []struct {
		tweak func(*Config)
		want  string
	}{
		{func(c *Config) { c.Issuer = "http://idp.example.com" }, "https URL"},
		{func(c *Config) { c.Issuer = "idp.example.com" }, "https URL"},
		{func(c *Config) { c.ClientID = "" }, "--oidc-client-id"},
		{func(c *Config) { c.GroupsClaim = "a..b" }, "--oidc-groups-claim"},
		{func(c *Config) { c.Scopes = []string{"email"} }, "openid scope"},
	} {
		cfg := good
		c.tweak(&cfg)
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", cfg, err, c.want)
		}
	}
}

func TestSecretFileReadableByOthersIsRefused(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secret, []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), Config{Issuer: "https://127.0.0.1:1", ClientID: "c", ClientSecretFile: secret}, callback, nil)
	if err == nil || !strings.Contains(err.Error(), "readable by other users") {
		t.Errorf("a world-readable secret file: %v", err)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
