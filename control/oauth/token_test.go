package oauth

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/token"
)

func codeForm(code, verifier, redirect string) url.Values {
	return url.Values{
		"grant_type":    {"authorization_code"},
		"client_id":     {api.ClientCLI},
		"code":          {code},
		"redirect_uri":  {redirect},
		"code_verifier": {verifier},
	}
}

// Every refusal of the token endpoint, with the RFC 6749 §5.2 code.
func TestTokenRefusals(t *testing.T) {
	h := newHarness(t, nil)
	v := oauth2.GenerateVerifier()
	edit := func(f url.Values, k, val string) url.Values {
		if val == "" {
			f.Del(k)
		} else {
			f.Set(k, val)
		}
		return f
	}
	for name, tc := range map[string]struct {
		form   func() url.Values
		code   string
		status int
	}{
		"no grant_type":     {func() url.Values { return edit(codeForm("x", v, h.redirect), "grant_type", "") }, "invalid_request", 400},
		"password grant":    {func() url.Values { return edit(codeForm("x", v, h.redirect), "grant_type", "password") }, "unsupported_grant_type", 400},
		"no client_id":      {func() url.Values { return edit(codeForm("x", v, h.redirect), "client_id", "") }, "invalid_client", 401},
		"unknown client":    {func() url.Values { return edit(codeForm("x", v, h.redirect), "client_id", "evil") }, "invalid_client", 401},
		"client secret":     {func() url.Values { return edit(codeForm("x", v, h.redirect), "client_secret", "s3cret") }, "invalid_client", 401},
		"no code":           {func() url.Values { return edit(codeForm("x", v, h.redirect), "code", "") }, "invalid_request", 400},
		"no redirect_uri":   {func() url.Values { return edit(codeForm("x", v, h.redirect), "redirect_uri", "") }, "invalid_request", 400},
		"no verifier":       {func() url.Values { return edit(codeForm(h.code(v), v, h.redirect), "code_verifier", "") }, "invalid_request", 400},
		"unknown code":      {func() url.Values { return codeForm("made-up", v, h.redirect) }, "invalid_grant", 400},
		"wrong verifier":    {func() url.Values { return codeForm(h.code(v), oauth2.GenerateVerifier(), h.redirect) }, "invalid_grant", 400},
		"short verifier":    {func() url.Values { return codeForm(h.code(v), "abc", h.redirect) }, "invalid_grant", 400},
		"redirect mismatch": {func() url.Values { return codeForm(h.code(v), v, h.redirect+"x") }, "invalid_grant", 400},
		"other client":      {func() url.Values { return edit(codeForm(h.code(v), v, h.redirect), "client_id", api.ClientDesktop) }, "invalid_grant", 400},
		"repeated param": {func() url.Values {
			f := codeForm(h.code(v), v, h.redirect)
			f.Add("code", "again")
			return f
		}, "invalid_request", 400},
	} {
		t.Run(name, func(t *testing.T) {
			a := h.tokenRequest(tc.form())
			if a.errCode() != tc.code || a.status != tc.status {
				t.Fatalf("got %d %v, want %d %s", a.status, a.body, tc.status, tc.code)
			}
			if d, _ := a.body["error_description"].(string); d == "" {
				t.Errorf("no error_description")
			}
			if a.header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q", a.header.Get("Cache-Control"))
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		resp, err := h.srv.Client().Get(h.srv.URL + api.PathToken)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Fatalf("got %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
	t.Run("JSON body", func(t *testing.T) {
		if a := h.rawPost(api.PathToken, "application/json", `{"grant_type":"authorization_code"}`); a.errCode() != "invalid_request" {
			t.Fatalf("got %v", a.body)
		}
	})
	t.Run("huge body", func(t *testing.T) {
		if a := h.rawPost(api.PathToken, "application/x-www-form-urlencoded", "code="+strings.Repeat("a", 1<<20)); a.errCode() != "invalid_request" {
			t.Fatalf("got %v", a.body)
		}
	})
}

// A code presented with the wrong verifier is burnt: the right verifier
// afterwards does not bring it back.
func TestWrongVerifierBurnsCode(t *testing.T) {
	h := newHarness(t, nil)
	v := oauth2.GenerateVerifier()
	code := h.code(v)
	if a := h.tokenRequest(codeForm(code, oauth2.GenerateVerifier(), h.redirect)); a.errCode() != "invalid_grant" {
		t.Fatalf("wrong verifier: %v", a.body)
	}
	if a := h.tokenRequest(codeForm(code, v, h.redirect)); a.errCode() != "invalid_grant" {
		t.Fatalf("right verifier after a wrong one: %v", a.body)
	}
}

// A code redeemed twice: the second is refused and the session of the
// first ends (RFC 6749 §4.1.2); others' sessions stay.
func TestReplayedCodeRevokesItsSession(t *testing.T) {
	h := newHarness(t, nil)
	v := oauth2.GenerateVerifier()
	code := h.code(v)
	first := h.tokenRequest(codeForm(code, v, h.redirect))
	tok, _ := first.body["access_token"].(string)
	other := h.tokenRequest(codeForm(h.code(v), v, h.redirect))
	otherTok, _ := other.body["access_token"].(string)
	if tok == "" || otherTok == "" || !h.backend.live(tok) {
		t.Fatalf("sign-ins: %v, %v", first.body, other.body)
	}
	if a := h.tokenRequest(codeForm(code, v, h.redirect)); a.errCode() != "invalid_grant" {
		t.Fatalf("the code again: %v", a.body)
	}
	if h.backend.live(tok) {
		t.Fatal("the session issued from the replayed code still works")
	}
	if !h.backend.live(otherTok) {
		t.Fatal("another sign-in's session ended too")
	}
}

func TestExpiredCode(t *testing.T) {
	h := newHarness(t, nil)
	v := oauth2.GenerateVerifier()
	code := h.code(v)
	h.clock.Advance(2 * time.Minute)
	a := h.tokenRequest(codeForm(code, v, h.redirect))
	if a.errCode() != "invalid_grant" || !strings.Contains(a.body["error_description"].(string), "expired") {
		t.Fatalf("expired code: %v", a.body)
	}
	// Just inside its lifetime it works.
	code = h.code(v)
	h.clock.Advance(2*time.Minute - time.Second)
	if a := h.tokenRequest(codeForm(code, v, h.redirect)); a.status != 200 {
		t.Fatalf("code at 1m59s: %v", a.body)
	}
}

// Codes are kept hashed: nothing in the store holds the code itself.
func TestCodesStoredHashed(t *testing.T) {
	h := newHarness(t, nil)
	v := oauth2.GenerateVerifier()
	code := h.code(v)
	ms := h.oauth.cfg.Store.(*memStore)
	ms.mu.Lock()
	for k, e := range ms.codes {
		if k == code || e.v.CodeHash == code || k != token.Hash(code) {
			t.Errorf("store key %q for code %q", k, code)
		}
	}
	ms.mu.Unlock()
}

// Some libraries send public clients as HTTP Basic with an empty secret.
func TestTokenBasicAuthPublicClient(t *testing.T) {
	h := newHarness(t, nil)
	v := oauth2.GenerateVerifier()
	f := codeForm(h.code(v), v, h.redirect)
	f.Del("client_id")
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+api.PathToken, strings.NewReader(f.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(api.ClientCLI, "")
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, h.srv.URL+api.PathToken, strings.NewReader(f.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(api.ClientCLI, "secret")
	resp, err = h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("secret: status %d WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}
