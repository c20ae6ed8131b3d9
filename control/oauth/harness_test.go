package oauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
)

// fakeClock is the injected clock: tests move it by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeBackend has users with plain passwords and records sessions.
type fakeBackend struct {
	clock *fakeClock
	mu    sync.Mutex
	users map[string]string
	// sessions by token: user and client
	sessions map[string][2]string
	grants   map[string]string // grant → token of the session issued from it
	checks   int               // CheckPassword calls
	// When hold is set, each check announces itself on entered and then
	// waits for hold to close.
	hold, entered chan struct{}
}

func (b *fakeBackend) CheckPassword(_ context.Context, email, password string) (bool, error) {
	b.mu.Lock()
	b.checks++
	p, ok := b.users[email]
	hold, entered := b.hold, b.entered
	b.mu.Unlock()
	if hold != nil {
		entered <- struct{}{}
		<-hold
	}
	return ok && p == password, nil
}

func (b *fakeBackend) CreateSession(_ context.Context, email, clientID, grant string) (string, time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	tok := hex.EncodeToString(raw)
	b.sessions[tok] = [2]string{email, clientID}
	if grant != "" {
		if b.grants == nil {
			b.grants = map[string]string{}
		}
		b.grants[grant] = tok
	}
	return tok, b.clock.Now().Add(24 * time.Hour), nil
}

func (b *fakeBackend) RevokeGrant(_ context.Context, grant string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	tok, ok := b.grants[grant]
	if _, live := b.sessions[tok]; !ok || !live {
		return false, nil
	}
	delete(b.sessions, tok)
	return true, nil
}

func (b *fakeBackend) live(tok string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.sessions[tok]
	return ok
}

func (b *fakeBackend) checkCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.checks
}

const (
	testUser     = "alice@example.com"
	testPassword = "correct horse battery staple"
)

// harness is an authorization server over real TLS with a fake clock, plus
// a loopback "app" listener that records what the browser was sent to.
type harness struct {
	t        testing.TB
	srv      *httptest.Server
	oauth    *Server
	clock    *fakeClock
	backend  *fakeBackend
	loopback *httptest.Server
	redirect string // loopback redirect URI

	mu       sync.Mutex
	callback url.Values // last query the loopback listener got
}

// testRemoteHeader lets a test pose as another source address: the
// harness copies it into RemoteAddr before the server sees the request.
const testRemoteHeader = "X-Test-Remote-Addr"

func newHarness(t testing.TB, tune func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: &fakeClock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}}
	h.backend = &fakeBackend{clock: h.clock, users: map[string]string{testUser: testPassword, "bob@example.com": "bobs password"}, sessions: map[string][2]string{}}
	var handler http.Handler
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get(testRemoteHeader); a != "" {
			r.RemoteAddr = a
		}
		handler.ServeHTTP(w, r)
	}))
	h.srv.StartTLS()
	t.Cleanup(h.srv.Close)
	cfg := Config{Issuer: h.srv.URL, Backend: h.backend, Store: NewMemoryStore(), Now: h.clock.Now, DeviceInterval: time.Second}
	if tune != nil {
		tune(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.oauth, handler = s, s.Handler()
	h.loopback = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.callback = r.URL.Query()
		h.mu.Unlock()
		io.WriteString(w, "<p>Signed in, you can close this tab.</p>")
	}))
	t.Cleanup(h.loopback.Close)
	h.redirect = h.loopback.URL + "/callback"
	return h
}

// browser is a client with its own cookie jar that does not follow
// redirects, so that tests see every Location.
func (h *harness) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	c := h.srv.Client()
	return &http.Client{
		Transport:     c.Transport,
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (h *harness) oauth2Config(client string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:    client,
		RedirectURL: h.redirect,
		Endpoint: oauth2.Endpoint{
			AuthURL:       h.srv.URL + api.PathAuthorize,
			TokenURL:      h.srv.URL + api.PathToken,
			DeviceAuthURL: h.srv.URL + api.PathDeviceCode,
			AuthStyle:     oauth2.AuthStyleInParams,
		},
	}
}

func (h *harness) ctx() context.Context {
	return context.WithValue(h.t.Context(), oauth2.HTTPClient, h.srv.Client())
}

// authURL is a valid authorization request; extra overrides parameters
// ("" deletes one).
func (h *harness) authURL(verifier string, extra map[string]string) string {
	q := url.Values{
		"client_id":             {api.ClientCLI},
		"response_type":         {"code"},
		"redirect_uri":          {h.redirect},
		"code_challenge":        {oauth2.S256ChallengeFromVerifier(verifier)},
		"code_challenge_method": {"S256"},
		"state":                 {"st-123"},
	}
	for k, v := range extra {
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
	}
	return h.srv.URL + api.PathAuthorize + "?" + q.Encode()
}

type testPage struct {
	status int
	header http.Header
	body   string
	form   url.Values // the first form's fields (buttons excluded)
	action string
}

func (h *harness) get(c *http.Client, u string) testPage {
	h.t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		h.t.Fatal(err)
	}
	return readPage(h.t, resp)
}

func (h *harness) post(c *http.Client, path string, form url.Values, hdr map[string]string) testPage {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.srv.URL)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return readPage(h.t, resp)
}

func readPage(t testing.TB, resp *http.Response) testPage {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	p := testPage{status: resp.StatusCode, header: resp.Header, body: string(b), form: url.Values{}}
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		return p
	}
	var first *html.Node
	var find func(n *html.Node)
	find = func(n *html.Node) {
		if first != nil {
			return
		}
		if n.Type == html.ElementNode && n.Data == "form" {
			first = n
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			find(c)
		}
	}
	find(doc)
	if first == nil {
		return p
	}
	p.action = attrOf(first, "action")
	var inputs func(n *html.Node)
	inputs = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "input" {
			p.form.Set(attrOf(n, "name"), attrOf(n, "value"))
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			inputs(c)
		}
	}
	inputs(first)
	return p
}

func attrOf(n *html.Node, k string) string {
	for _, a := range n.Attr {
		if a.Key == k {
			return a.Val
		}
	}
	return ""
}

// location parses a redirect's Location and its query.
func (p testPage) location(t testing.TB) (*url.URL, url.Values) {
	t.Helper()
	loc := p.header.Get("Location")
	if p.status != http.StatusFound || loc == "" {
		t.Fatalf("want a 302 redirect, got %d Location=%q: %s", p.status, loc, p.body)
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	return u, u.Query()
}

// login opens the login page and posts it with password.
func (h *harness) login(c *http.Client, authURL, user, password string) testPage {
	h.t.Helper()
	pg := h.get(c, authURL)
	if pg.status != http.StatusOK {
		h.t.Fatalf("login page: %d %s", pg.status, pg.body)
	}
	f := pg.form
	f.Set("username", user)
	f.Set("password", password)
	f.Set("action", "login")
	return h.post(c, api.PathAuthorize, f, nil)
}

// code signs in and returns the authorization code from the redirect.
func (h *harness) code(verifier string) string {
	h.t.Helper()
	res := h.login(h.browser(), h.authURL(verifier, nil), testUser, testPassword)
	_, q := res.location(h.t)
	if q.Get("code") == "" {
		h.t.Fatalf("no code in redirect: %v", q)
	}
	return q.Get("code")
}

type tokenAnswer struct {
	status int
	header http.Header
	body   map[string]any
}

func (a tokenAnswer) errCode() string { s, _ := a.body["error"].(string); return s }

// tokenRequest posts form to the token endpoint.
func (h *harness) tokenRequest(form url.Values) tokenAnswer {
	h.t.Helper()
	return h.rawPost(api.PathToken, "application/x-www-form-urlencoded", form.Encode())
}

func (h *harness) rawPost(path, ctype, body string) tokenAnswer {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	a := tokenAnswer{status: resp.StatusCode, header: resp.Header, body: map[string]any{}}
	if err := json.NewDecoder(resp.Body).Decode(&a.body); err != nil {
		h.t.Fatalf("token endpoint answered non-JSON (%d): %v", resp.StatusCode, err)
	}
	return a
}
