package oauth

import (
	"net/http"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
)

// The console (control's own page) signs in with PKCE like the apps, but
// its client may redirect to control's /console/callback only, and the
// apps may not redirect there.
func TestConsoleClientRedirect(t *testing.T) {
	h := newHarness(t, nil)
	console := h.srv.URL + ConsoleCallback
	v := oauth2.GenerateVerifier()
	pg := h.get(h.browser(), h.authURL(v, map[string]string{"client_id": api.ClientConsole, "redirect_uri": console}))
	if pg.status != http.StatusOK || !pg.form.Has("password") || !strings.Contains(pg.body, "Sign in to see and manage your VPN in the RunOS console.") {
		t.Fatalf("console login page: %d %s", pg.status, pg.body)
	}
	if csp := pg.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self';") {
		t.Errorf("CSP %q: the console's form goes to control only", csp)
	}
	res := h.login(h.browser(), h.authURL(v, map[string]string{"client_id": api.ClientConsole, "redirect_uri": console}), testUser, testPassword)
	loc, q := res.location(t)
	if loc.String() != console+"?"+loc.RawQuery || q.Get("code") == "" {
		t.Fatalf("redirected to %s", loc)
	}
	conf := h.oauth2Config(api.ClientConsole)
	conf.RedirectURL = console
	tok, err := conf.Exchange(h.ctx(), q.Get("code"), oauth2.VerifierOption(v))
	if err != nil || h.backend.sessions[tok.AccessToken] != [2]string{testUser, api.ClientConsole} {
		t.Fatalf("exchange: %+v, %v", tok, err)
	}
	for name, extra := range map[string]map[string]string{
		"console elsewhere":      {"client_id": api.ClientConsole, "redirect_uri": "https://evil.example/console/callback"},
		"console to loopback":    {"client_id": api.ClientConsole, "redirect_uri": "http://127.0.0.1:4000/callback"},
		"console other path":     {"client_id": api.ClientConsole, "redirect_uri": h.srv.URL + "/console/callback/x"},
		"cli to the console":     {"client_id": api.ClientCLI, "redirect_uri": console},
		"desktop to the console": {"client_id": api.ClientDesktop, "redirect_uri": console},
	} {
		pg := h.get(h.browser(), h.authURL(v, extra))
		if pg.status != http.StatusBadRequest || pg.header.Get("Location") != "" {
			t.Errorf("%s: %d Location=%q, want 400 with no redirect", name, pg.status, pg.header.Get("Location"))
		}
	}
}
