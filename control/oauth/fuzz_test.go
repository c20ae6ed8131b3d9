package oauth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

func FuzzCheckRedirectURI(f *testing.F) {
	for _, s := range []string{
		"http://127.0.0.1:5000/callback", "http://[::1]:1/", "http://localhost:5000/cb", "http://127.0.0.1:5000@evil/cb",
		"http://127.0.0.1:05000/cb", "http://127.0.0.1:65536/cb", "http://127.0.0.1:5000/a%2F..%5Cb", "http://127.0.0.1:5000\\@evil/",
		"http://127.0.0.1:5000/cb?x=1", "http://127.0.0.1:5000/cb#f", "http://[::1]:80/%zz", "HTTP://127.0.0.1:1/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := checkRedirectURI(raw)
		if err != nil {
			return
		}
		if u.Scheme != "http" || (u.Host != "127.0.0.1:"+u.Port() && u.Host != "[::1]:"+u.Port()) ||
			u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
			t.Fatalf("accepted %q as %#v", raw, u)
		}
		// What a browser would be sent to is the same loopback origin.
		back, err := url.Parse(withParams(u, url.Values{"code": {"c"}, "state": {"s"}}))
		if err != nil || back.Host != u.Host || back.Scheme != "http" || back.Query().Get("code") != "c" {
			t.Fatalf("redirect for %q: %v %v", raw, back, err)
		}
	})
}

func FuzzParseAuthRequest(f *testing.F) {
	f.Add("client_id=runos-cli&response_type=code&redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2Fcb&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&state=x")
	f.Add("client_id=runos-cli&client_id=runos-desktop")
	f.Add("redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2Fcb&client_id=runos-cli&code_challenge_method=plain")
	f.Add("client_id=runos-console&response_type=code&redirect_uri=https%3A%2F%2Fcontrol.example%2Fconsole%2Fcallback&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&state=x")
	f.Add("client_id=runos-console&response_type=code&redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2Fcb&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256")
	f.Add("client_id=runos-cli&response_type=code&redirect_uri=https%3A%2F%2Fcontrol.example%2Fconsole%2Fcallback&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256")
	f.Fuzz(func(t *testing.T, q string) {
		vs, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		const console = "https://control.example/console/callback"
		a, e := parseAuthRequest(vs, console)
		trusted := func(u string) bool {
			_, err := checkRedirectURI(u)
			return err == nil || a.ClientID == api.ClientConsole && u == console
		}
		if e != nil {
			if e.redirect {
				if !trusted(a.RedirectURI) || a.redirect == nil {
					t.Fatalf("would redirect an error to an unchecked URI %q", a.RedirectURI)
				}
				if e.code == "" {
					t.Fatal("redirected error without a code")
				}
			}
			return
		}
		if _, ok := clients[a.ClientID]; !ok || !validChallenge(a.Challenge) || len(a.State) > maxState {
			t.Fatalf("accepted %+v", a)
		}
		if !trusted(a.RedirectURI) {
			t.Fatalf("accepted redirect %q", a.RedirectURI)
		}
	})
}

// fuzzServer is an in-process server for fuzzing request parsing.
func fuzzServer(f *testing.F) *Server {
	clock := &fakeClock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	b := &fakeBackend{clock: clock, users: map[string]string{testUser: testPassword}, sessions: map[string][2]string{}}
	s, err := New(Config{Issuer: "https://control.example", Backend: b, Store: NewMemoryStore(), Now: clock.Now})
	if err != nil {
		f.Fatal(err)
	}
	return s
}

var tokenErrors = map[string]bool{
	"invalid_request": true, "invalid_client": true, "invalid_grant": true, "unsupported_grant_type": true,
	"authorization_pending": true, "slow_down": true, "access_denied": true, "expired_token": true,
}

// Whatever the body, the token and device endpoints answer a JSON error
// RFC 6749 or RFC 8628 names, never a token and never a server error.
func FuzzTokenRequest(f *testing.F) {
	s := fuzzServer(f)
	f.Add("/oauth/token", "grant_type=authorization_code&client_id=runos-cli&code=x&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2F&code_verifier=abc")
	f.Add("/oauth/token", "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&client_id=runos-cli&device_code=x")
	f.Add("/oauth/token", "grant_type=%zz")
	f.Add("/oauth/device/code", "client_id=runos-cli&client_id=runos-cli")
	f.Add("/oauth/device/code", "client_id=nope")
	f.Fuzz(func(t *testing.T, path, body string) {
		if path != api.PathToken && path != api.PathDeviceCode {
			path = api.PathToken
		}
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if path == api.PathDeviceCode && w.Code == http.StatusOK {
			return // a valid device request from random bytes: fine
		}
		var e struct{ Error, ErrorDescription string }
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || !tokenErrors[e.Error] || w.Code >= 500 || w.Code < 400 {
			t.Fatalf("%s %q: %d %s", path, body, w.Code, w.Body)
		}
	})
}

// Whatever is posted to the login forms, no code is issued (no CSRF token
// can be valid), nothing is redirected off loopback, and nothing fails.
func FuzzLoginForms(f *testing.F) {
	s := fuzzServer(f)
	f.Add("/oauth/authorize", "client_id=runos-cli&response_type=code&redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2Fcb&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&username=alice%40example.com&password=correct+horse+battery+staple&csrf=AAAA")
	f.Add("/oauth/device", "user_code=BCDF-GHJK&username=a&password=b&action=approve&ticket=x&user=alice%40example.com")
	f.Add("/oauth/device", "action=login&user_code=%00")
	f.Fuzz(func(t *testing.T, path, body string) {
		if path != api.PathAuthorize && path != api.PathDeviceVerify {
			path = api.PathAuthorize
		}
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %q: %d", path, body, w.Code)
		}
		if loc := w.Header().Get("Location"); loc != "" {
			u, err := url.Parse(loc)
			if err != nil || (u.Hostname() != "127.0.0.1" && u.Hostname() != "::1") || u.Query().Get("code") != "" {
				t.Fatalf("%s %q redirected to %q", path, body, loc)
			}
		}
	})
}

func FuzzNormalizeUserCode(f *testing.F) {
	for _, s := range []string{"BCDF-GHJK", "bcdf ghjk", "BCDF-GHJ", "ＢCDF", "--------"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n := normalizeUserCode(in)
		if n == "" {
			return
		}
		if len(n) != 9 || n[4] != '-' || normalizeUserCode(n) != n {
			t.Fatalf("normalizeUserCode(%q) = %q", in, n)
		}
	})
}

func FuzzParseParams(f *testing.F) {
	f.Add("a=1&b=2")
	f.Add("a=1&a=2")
	f.Add("a=%zz")
	f.Fuzz(func(t *testing.T, in string) {
		p, err := parseParams(in)
		if err != nil {
			return
		}
		vs, _ := url.ParseQuery(in)
		for k, v := range p {
			if len(vs[k]) != 1 || vs[k][0] != v || v == "" {
				t.Fatalf("parseParams(%q)[%q] = %q; query has %q", in, k, v, vs[k])
			}
		}
	})
}
