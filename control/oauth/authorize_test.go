package oauth

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
)

// A full PKCE sign-in driven by golang.org/x/oauth2, the browser part done
// through the real form.
func TestPKCEFlowWithOAuth2(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauth2Config(api.ClientCLI)
	verifier := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("state-xyz", oauth2.S256ChallengeOption(verifier))

	res := h.login(h.browser(), authURL, testUser, testPassword)
	loc, q := res.location(t)
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != h.redirect {
		t.Fatalf("redirected to %s, want %s", got, h.redirect)
	}
	if q.Get("state") != "state-xyz" || q.Get("iss") != h.srv.URL || q.Get("code") == "" {
		t.Fatalf("redirect query %v: want code, state-xyz and iss", q)
	}
	tok, err := conf.Exchange(h.ctx(), q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if tok.TokenType != "Bearer" || tok.AccessToken == "" {
		t.Fatalf("token %+v", tok)
	}
	if tok.ExpiresIn != int64((24 * time.Hour).Seconds()) {
		t.Errorf("expires_in = %d, want 24h in seconds", tok.ExpiresIn)
	}
	if who := h.backend.sessions[tok.AccessToken]; who != [2]string{testUser, api.ClientCLI} {
		t.Errorf("session for %v, want alice via runos-cli", who)
	}

	// The same code again: refused, as RFC 6749 §4.1.2 requires.
	_, err = conf.Exchange(h.ctx(), q.Get("code"), oauth2.VerifierOption(verifier))
	assertOAuthError(t, err, "invalid_grant")
}

func assertOAuthError(t *testing.T, err error, code string) {
	t.Helper()
	re, ok := err.(*oauth2.RetrieveError)
	if !ok {
		t.Fatalf("want OAuth error %s, got %v", code, err)
	}
	if re.ErrorCode != code {
		t.Fatalf("error %q (%s), want %q", re.ErrorCode, re.ErrorDescription, code)
	}
}

// Requests whose client or redirect URI cannot be trusted are refused on a
// page and never redirected (RFC 6749 §4.1.2.1).
func TestAuthorizeRefusedOnPage(t *testing.T) {
	h := newHarness(t, nil)
	v := oauth2.GenerateVerifier()
	for name, extra := range map[string]map[string]string{
		"no client_id":       {"client_id": ""},
		"unknown client":     {"client_id": "evil-app"},
		"no redirect_uri":    {"redirect_uri": ""},
		"localhost":          {"redirect_uri": "http://localhost:4000/callback"},
		"https loopback":     {"redirect_uri": "https://127.0.0.1:4000/callback"},
		"other loopback ip":  {"redirect_uri": "http://127.0.0.2:4000/callback"},
		"public host":        {"redirect_uri": "http://198.51.100.7:4000/callback"},
		"no port":            {"redirect_uri": "http://127.0.0.1/callback"},
		"userinfo trick":     {"redirect_uri": "http://127.0.0.1:80@evil.example/callback"},
		"custom scheme":      {"redirect_uri": "com.example.app:/callback"},
		"fragment":           {"redirect_uri": "http://127.0.0.1:4000/cb#x"},
		"no path":            {"redirect_uri": "http://127.0.0.1:4000"},
		"decimal ip literal": {"redirect_uri": "http://2130706433:4000/cb"},
	} {
		t.Run(name, func(t *testing.T) {
			pg := h.get(h.browser(), h.authURL(v, extra))
			if pg.status != http.StatusBadRequest || pg.header.Get("Location") != "" {
				t.Fatalf("got %d Location=%q, want 400 with no redirect", pg.status, pg.header.Get("Location"))
			}
			if !strings.Contains(pg.body, "Start the sign-in again") || pg.form.Has("password") {
				t.Fatalf("want an error page with no login form, got %s", pg.body)
			}
		})
	}
	// A repeated redirect_uri is as untrustworthy as a bad one.
	u := h.authURL(v, nil) + "&redirect_uri=" + url.QueryEscape("http://127.0.0.1:1/evil")
	if pg := h.get(h.browser(), u); pg.status != http.StatusBadRequest || pg.header.Get("Location") != "" {
		t.Fatalf("duplicate redirect_uri: got %d %q", pg.status, pg.header.Get("Location"))
	}
}

// Once the redirect URI is known good, errors go back to it with state.
func TestAuthorizeRefusedByRedirect(t *testing.T) {
	h := newHarness(t, nil)
	v := oauth2.GenerateVerifier()
	for name, tc := range map[string]struct {
		extra map[string]string
		code  string
	}{
		"plain PKCE":         {map[string]string{"code_challenge_method": "plain"}, "invalid_request"},
		"no PKCE method":     {map[string]string{"code_challenge_method": ""}, "invalid_request"},
		"no challenge":       {map[string]string{"code_challenge": ""}, "invalid_request"},
		"short challenge":    {map[string]string{"code_challenge": "abc"}, "invalid_request"},
		"no response_type":   {map[string]string{"response_type": ""}, "invalid_request"},
		"implicit grant":     {map[string]string{"response_type": "token"}, "unsupported_response_type"},
		"huge state":         {map[string]string{"state": strings.Repeat("s", 2000)}, "invalid_request"},
		"ipv6 loopback, bad": {map[string]string{"redirect_uri": "http://[::1]:5000/cb", "code_challenge_method": "plain"}, "invalid_request"},
	} {
		t.Run(name, func(t *testing.T) {
			pg := h.get(h.browser(), h.authURL(v, tc.extra))
			loc, q := pg.location(t)
			want := h.redirect
			if r := tc.extra["redirect_uri"]; r != "" {
				want = r
			}
			if loc.Scheme+"://"+loc.Host+loc.Path != want {
				t.Fatalf("redirected to %s, want %s", loc, want)
			}
			if q.Get("error") != tc.code || q.Get("error_description") == "" || q.Get("code") != "" {
				t.Fatalf("query %v, want error=%s with a description and no code", q, tc.code)
			}
			wantState := "st-123"
			if name == "huge state" {
				wantState = ""
			}
			if q.Get("state") != wantState {
				t.Fatalf("state %q, want %q", q.Get("state"), wantState)
			}
		})
	}
	// Duplicated parameters (RFC 6749 §3.1).
	pg := h.get(h.browser(), h.authURL(v, nil)+"&state=again")
	if _, q := pg.location(t); q.Get("error") != "invalid_request" {
		t.Fatalf("duplicate state: %v", q)
	}
}

func TestLoginPage(t *testing.T) {
	h := newHarness(t, nil)
	pg := h.get(h.browser(), h.authURL(oauth2.GenerateVerifier(), nil))
	if pg.status != http.StatusOK {
		t.Fatalf("status %d", pg.status)
	}
	csp := pg.header.Get("Content-Security-Policy")
	lb, _ := url.Parse(h.redirect)
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self' http://" + lb.Host, "style-src 'sha256-"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	for k, want := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"} {
		if got := pg.header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	for _, f := range []string{"username", "password", "csrf", "client_id", "redirect_uri", "code_challenge", "state"} {
		if !pg.form.Has(f) {
			t.Errorf("form lacks %s", f)
		}
	}
	for _, want := range []string{`method="post"`, `<label for="username">`, `<label for="password">`, `type="password"`, `autocomplete="current-password"`, `lang="en"`} {
		if !strings.Contains(pg.body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	var cookie bool
	for _, c := range pg.header.Values("Set-Cookie") {
		cookie = cookie || strings.HasPrefix(c, "__Host-runos-csrf=") && strings.Contains(c, "HttpOnly") && strings.Contains(c, "Secure") && strings.Contains(c, "SameSite=Strict")
	}
	if !cookie {
		t.Errorf("no __Host- CSRF cookie (HttpOnly, Secure, SameSite=Strict): %v", pg.header.Values("Set-Cookie"))
	}
}

func TestWrongPasswordShowsPageAgain(t *testing.T) {
	h := newHarness(t, nil)
	pg := h.login(h.browser(), h.authURL(oauth2.GenerateVerifier(), nil), testUser, "wrong")
	if pg.status != http.StatusOK || pg.header.Get("Location") != "" {
		t.Fatalf("got %d Location=%q", pg.status, pg.header.Get("Location"))
	}
	if !strings.Contains(pg.body, "Wrong email or password.") || !pg.form.Has("password") || pg.form.Get("username") != testUser {
		t.Fatalf("want the form again with the error and the username kept: %s", pg.body)
	}
	// Unknown users get the very same answer.
	pg = h.login(h.browser(), h.authURL(oauth2.GenerateVerifier(), nil), "nobody@example.com", "x")
	if !strings.Contains(pg.body, "Wrong email or password.") {
		t.Fatalf("unknown user: %s", pg.body)
	}
}

func TestCancelRedirectsAccessDenied(t *testing.T) {
	h := newHarness(t, nil)
	c := h.browser()
	f := h.get(c, h.authURL(oauth2.GenerateVerifier(), nil)).form
	f.Set("action", "cancel")
	_, q := h.post(c, api.PathAuthorize, f, nil).location(t)
	if q.Get("error") != "access_denied" || q.Get("state") != "st-123" {
		t.Fatalf("cancel: %v", q)
	}
}

// The login form only works from the page served to this browser for this
// very request, before it expires.
func TestLoginCSRF(t *testing.T) {
	h := newHarness(t, nil)
	v := oauth2.GenerateVerifier()
	fresh := func() (*http.Client, url.Values) {
		c := h.browser()
		f := h.get(c, h.authURL(v, nil)).form
		f.Set("username", testUser)
		f.Set("password", testPassword)
		return c, f
	}
	refused := func(t *testing.T, pg testPage) {
		t.Helper()
		if pg.status != http.StatusForbidden || pg.header.Get("Location") != "" || !strings.Contains(pg.body, "expired or was not opened in this browser") {
			t.Fatalf("got %d Location=%q, want 403 with the form again: %s", pg.status, pg.header.Get("Location"), pg.body)
		}
	}
	t.Run("no token", func(t *testing.T) {
		c, f := fresh()
		f.Del("csrf")
		refused(t, h.post(c, api.PathAuthorize, f, nil))
	})
	t.Run("garbage token", func(t *testing.T) {
		c, f := fresh()
		tok := []byte(f.Get("csrf"))
		tok[20] ^= 1 // inside the MAC
		f.Set("csrf", string(tok))
		refused(t, h.post(c, api.PathAuthorize, f, nil))
	})
	t.Run("another browser", func(t *testing.T) {
		_, f := fresh()
		other := h.browser()
		h.get(other, h.authURL(v, nil)) // has a cookie of its own
		refused(t, h.post(other, api.PathAuthorize, f, nil))
	})
	t.Run("no cookie", func(t *testing.T) {
		_, f := fresh()
		refused(t, h.post(h.browser(), api.PathAuthorize, f, nil))
	})
	t.Run("request edited", func(t *testing.T) {
		c, f := fresh()
		f.Set("code_challenge", oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
		refused(t, h.post(c, api.PathAuthorize, f, nil))
	})
	t.Run("redirect edited", func(t *testing.T) {
		c, f := fresh()
		f.Set("redirect_uri", "http://127.0.0.1:9/evil")
		refused(t, h.post(c, api.PathAuthorize, f, nil))
	})
	t.Run("cross-site origin", func(t *testing.T) {
		c, f := fresh()
		refused(t, h.post(c, api.PathAuthorize, f, map[string]string{"Origin": "https://evil.example"}))
	})
	t.Run("expired page", func(t *testing.T) {
		c, f := fresh()
		h.clock.Advance(16 * time.Minute)
		refused(t, h.post(c, api.PathAuthorize, f, nil))
	})
	t.Run("ok without Origin", func(t *testing.T) {
		c, f := fresh()
		if pg := h.post(c, api.PathAuthorize, f, map[string]string{"Origin": ""}); pg.status != http.StatusFound {
			t.Fatalf("got %d: %s", pg.status, pg.body)
		}
	})
	if n := h.backend.checkCount(); n != 1 {
		t.Errorf("passwords checked %d times, want once (refused forms are never checked)", n)
	}
}

func TestMetadata(t *testing.T) {
	h := newHarness(t, nil)
	resp, err := h.srv.Client().Get(h.srv.URL + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	a := readPage(t, resp)
	for _, want := range []string{
		`"issuer":"` + h.srv.URL + `"`,
		`"authorization_endpoint":"` + h.srv.URL + `/oauth/authorize"`,
		`"token_endpoint":"` + h.srv.URL + `/oauth/token"`,
		`"device_authorization_endpoint":"` + h.srv.URL + `/oauth/device/code"`,
		`"code_challenge_methods_supported":["S256"]`,
		`"urn:ietf:params:oauth:grant-type:device_code"`,
	} {
		if !strings.Contains(a.body, want) {
			t.Errorf("metadata lacks %s: %s", want, a.body)
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	b, st := &fakeBackend{}, NewMemoryStore()
	for name, c := range map[string]Config{
		"no issuer":       {Backend: b, Store: st},
		"issuer path":     {Issuer: "https://x.example/auth", Backend: b, Store: st},
		"issuer scheme":   {Issuer: "ftp://x.example", Backend: b, Store: st},
		"no backend":      {Issuer: "https://x.example", Store: st},
		"long code ttl":   {Issuer: "https://x.example", Backend: b, Store: st, CodeTTL: time.Hour},
		"ms interval":     {Issuer: "https://x.example", Backend: b, Store: st, DeviceInterval: 1500 * time.Millisecond},
		"short secret":    {Issuer: "https://x.example", Backend: b, Store: st, Secret: []byte("abc")},
		"long device ttl": {Issuer: "https://x.example", Backend: b, Store: st, DeviceCodeTTL: 2 * time.Hour},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}
