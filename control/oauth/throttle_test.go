package oauth

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/syncbuf"
)

func TestThrottlePolicy(t *testing.T) {
	p := throttlePolicy{userFree: 3, base: time.Second, max: 10 * time.Second}
	for n, want := range map[int]time.Duration{0: 0, 2: 0, 3: time.Second, 4: 2 * time.Second, 5: 4 * time.Second, 6: 8 * time.Second, 7: 10 * time.Second, 60: 10 * time.Second} {
		if got := p.delay(n, 3); got != want {
			t.Errorf("delay(%d) = %v, want %v", n, got, want)
		}
	}
}

func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:5555":              "a:192.0.2.1",
		"[::ffff:192.0.2.1]:1":        "a:192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:443":  "a:2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:9":    "a:2001:db8:1:2::/64",
		"not an address":              "a:not an address",
		"[fe80::1%eth0]:1":            "a:fe80::/64",
		"[2001:db8:1:3:3:4:5:6]:443":  "a:2001:db8:1:3::/64",
		"[2001:db8:1:2:3:4:5:6%x]:44": "a:2001:db8:1:2::/64",
	} {
		if got := addrKey(in); got != want {
			t.Errorf("addrKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// attempt opens a fresh login page as from addr and posts a password.
func (h *harness) attempt(user, password, addr string) testPage {
	h.t.Helper()
	c := h.browser()
	u := h.authURL(oauth2.GenerateVerifier(), nil)
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set(testRemoteHeader, addr)
	resp, err := c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	f := readPage(h.t, resp).form
	f.Set("username", user)
	f.Set("password", password)
	return h.post(c, api.PathAuthorize, f, map[string]string{testRemoteHeader: addr})
}

func isSlowed(p testPage) bool {
	return p.status == http.StatusTooManyRequests && strings.Contains(p.body, "Too many failed sign-in attempts. Wait")
}

func TestSlowDownPerUser(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.UserFailures = 3; c.AddrFailures = 1000 })
	// Wrong passwords for one user from one address (each from another
	// port: a new connection): the user's count there slows them down.
	addr := func(i int) string { return "192.0.2.1:" + string(rune('1'+i)) + "000" }
	for i := range 3 {
		if p := h.attempt(testUser, "wrong", addr(i)); p.status != 200 {
			t.Fatalf("failure %d: %d", i+1, p.status)
		}
	}
	checks := h.backend.checkCount()
	// The fourth attempt within 1 s is refused, right password or not, and
	// the password is not even checked.
	p := h.attempt(testUser, testPassword, addr(4))
	if !isSlowed(p) || p.header.Get("Retry-After") != "1" || !strings.Contains(p.body, "Wait 1 second and try again.") {
		t.Fatalf("want slowed down for 1 second, got %d Retry-After=%q: %s", p.status, p.header.Get("Retry-After"), p.body)
	}
	if h.backend.checkCount() != checks {
		t.Fatalf("the password was checked while slowed down")
	}
	// Another spelling of the same account is the same account.
	if p := h.attempt("  ALICE@example.com ", testPassword, addr(5)); !isSlowed(p) {
		t.Fatalf("case variant not slowed: %d", p.status)
	}
	// Other users are not affected.
	if p := h.attempt("bob@example.com", "bobs password", addr(6)); p.status != http.StatusFound {
		t.Fatalf("bob: %d %s", p.status, p.body)
	}
	// The window grows: after the next failure it is 2 s.
	h.clock.Advance(time.Second)
	if p := h.attempt(testUser, "wrong", addr(7)); p.status != 200 {
		t.Fatalf("after waiting: %d", p.status)
	}
	h.clock.Advance(1500 * time.Millisecond)
	if p := h.attempt(testUser, testPassword, addr(8)); !isSlowed(p) || p.header.Get("Retry-After") != "1" {
		t.Fatalf("want 0.5 s more to wait, got %d Retry-After=%q", p.status, p.header.Get("Retry-After"))
	}
	h.clock.Advance(500 * time.Millisecond)
	// A right password goes through and resets the user's count.
	if p := h.attempt(testUser, testPassword, addr(8)); p.status != http.StatusFound {
		t.Fatalf("right password after waiting: %d %s", p.status, p.body)
	}
	for i := range 3 {
		if p := h.attempt(testUser, "wrong", addr(i)); p.status != 200 {
			t.Fatalf("after reset, failure %d: %d", i+1, p.status)
		}
	}
	if p := h.attempt(testUser, "wrong", addr(0)); !isSlowed(p) {
		t.Fatalf("after reset and 3 failures: %d", p.status)
	}
}

func TestSlowDownPerAddress(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.UserFailures = 1000; c.AddrFailures = 4 })
	const attacker = "203.0.113.9:4444"
	// Spraying many accounts from one address.
	for i := range 4 {
		if p := h.attempt("user"+string(rune('a'+i))+"@example.com", "guess", attacker); p.status != 200 {
			t.Fatalf("failure %d: %d", i+1, p.status)
		}
	}
	if p := h.attempt(testUser, testPassword, attacker); !isSlowed(p) {
		t.Fatalf("fifth attempt from the address: %d", p.status)
	}
	// The same user from another address is fine.
	if p := h.attempt(testUser, testPassword, "198.51.100.20:1"); p.status != http.StatusFound {
		t.Fatalf("other address: %d %s", p.status, p.body)
	}
	// Signing in to one's own account does not reset the address.
	h.clock.Advance(time.Second)
	if p := h.attempt("bob@example.com", "bobs password", attacker); p.status != http.StatusFound {
		t.Fatalf("bob after the wait: %d", p.status)
	}
	if p := h.attempt("userz@example.com", "guess", attacker); p.status != 200 {
		t.Fatalf("a further guess after the wait: %d", p.status)
	}
	if p := h.attempt(testUser, testPassword, attacker); !isSlowed(p) {
		t.Fatalf("address count survived bob's sign-in: want slowed, got %d", p.status)
	}
	// Failures are forgotten after a quiet while.
	h.clock.Advance(time.Hour)
	if p := h.attempt(testUser, testPassword, attacker); p.status != http.StatusFound {
		t.Fatalf("after an hour: %d", p.status)
	}
}

// The check and the count are one step: of 30 wrong passwords sent at once
// (from one address), the 5 a user is allowed there reach the password
// check and the others are refused before it.
func TestParallelWrongPasswordsCheckOnlyTheFree(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.UserFailures = 5; c.AddrFailures = 1000 })
	const n = 30
	hold, entered := make(chan struct{}), make(chan struct{}, n)
	h.backend.mu.Lock()
	h.backend.hold, h.backend.entered = hold, entered
	h.backend.mu.Unlock()
	pages := make(chan testPage, n)
	for i := range n {
		go func() { pages <- h.attempt(testUser, "wrong", fmt.Sprintf("192.0.2.1:%d", 1000+i)) }()
	}
	// Every attempt is now either inside the check (held there) or answered.
	checking, slowed := 0, 0
	for checking+slowed < n {
		select {
		case <-entered:
			checking++
		case p := <-pages:
			if !isSlowed(p) {
				t.Fatalf("an attempt answered while every check is held: %d %s", p.status, p.body)
			}
			slowed++
		}
	}
	close(hold)
	for range checking {
		if p := <-pages; p.status != http.StatusOK || !strings.Contains(p.body, "Wrong email or password.") {
			t.Fatalf("a checked wrong password: %d", p.status)
		}
	}
	if checking != 5 || slowed != n-5 {
		t.Fatalf("%d passwords checked and %d refused, want 5 and %d", checking, slowed, n-5)
	}
}

// A flood of POST /oauth/device/code from one address gets its allowance
// and then 429 with Retry-After, writing nothing more; other addresses go
// on, and a full table of pending codes refuses every address.
func TestDeviceCodeThrottledPerAddress(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DeviceCodesPerAddr = 3; c.DeviceCodeWindow = time.Minute; c.MaxPendingDevices = 5 })
	ask := func(addr string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+api.PathDeviceCode, strings.NewReader("client_id="+api.ClientCLI))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set(testRemoteHeader, addr)
		resp, err := h.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for i := range 3 {
		if resp, body := ask("203.0.113.7:1"); resp.StatusCode != http.StatusOK {
			t.Fatalf("device code %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	resp, body := ask("203.0.113.7:2")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" || !strings.Contains(body, "slow_down") {
		t.Fatalf("fourth from one address: %d Retry-After=%q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	ms := h.oauth.cfg.Store.(*memStore)
	ms.mu.Lock()
	pending := len(ms.devices)
	ms.mu.Unlock()
	if pending != 3 {
		t.Fatalf("%d device codes stored, want 3: a refused request must write none", pending)
	}
	// Another address is not slowed by the first; the cap of 5 pending
	// codes then refuses everyone until some expire.
	for i := range 2 {
		if resp, body := ask("198.51.100.40:1"); resp.StatusCode != http.StatusOK {
			t.Fatalf("other address, code %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	if resp, body := ask("198.51.100.41:1"); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "temporarily_unavailable") {
		t.Fatalf("past the cap of pending codes: %d %s", resp.StatusCode, body)
	}
	// The window passes: the first address may ask again (the codes of
	// 10 minutes are still pending, so the cap still holds it back).
	h.clock.Advance(time.Minute)
	if resp, _ := ask("203.0.113.7:3"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after the window, with 5 codes pending: %d, want the cap's 503", resp.StatusCode)
	}
	h.clock.Advance(10 * time.Minute) // every code expired
	if resp, body := ask("203.0.113.7:4"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the codes expired: %d %s", resp.StatusCode, body)
	}
}

// Someone else's guesses never lock a user out: wrong passwords for alice
// from other addresses (one, or many) slow those addresses down, and alice
// signing in from her own goes through at once. The guessing address
// stays slowed for every user.
func TestOthersGuessesDoNotLockTheUser(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.UserFailures = 3; c.AddrFailures = 20 })
	const attacker = "203.0.113.9:4444"
	for i := range 3 {
		if p := h.attempt(testUser, "guess", attacker); p.status != 200 {
			t.Fatalf("guess %d: %d", i+1, p.status)
		}
	}
	if p := h.attempt(testUser, "guess", attacker); !isSlowed(p) {
		t.Fatalf("a fourth guess from the same address: %d, want slowed", p.status)
	}
	for i := range 10 {
		if p := h.attempt(testUser, "guess", fmt.Sprintf("198.51.100.%d:1", i+1)); p.status != 200 {
			t.Fatalf("guess from address %d: %d", i+1, p.status)
		}
	}
	if p := h.attempt(testUser, testPassword, "192.0.2.77:5000"); p.status != http.StatusFound {
		t.Fatalf("alice from her own address after others' guesses: %d %s", p.status, p.body)
	}
}

// Nothing typed into the sign-in form reaches the log: people type their
// password into the email field, and a failed (or slowed) sign-in logs a
// keyed digest of what was typed at most.
func TestFailedSignInLogsNoFormText(t *testing.T) {
	var log syncbuf.Buffer
	h := newHarness(t, func(c *Config) {
		c.UserFailures = 1
		c.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	const typed, pw = "MySecretPassw0rd!", "another-secret-typed"
	if p := h.attempt(typed, pw, "192.0.2.5:1"); p.status != 200 {
		t.Fatalf("wrong password: %d", p.status)
	}
	if p := h.attempt(typed, pw, "192.0.2.5:2"); !isSlowed(p) {
		t.Fatalf("second wrong password: %d, want slowed", p.status)
	}
	out := log.String()
	if !strings.Contains(out, "wrong password") || !strings.Contains(out, "slowed down") {
		t.Fatalf("the failures were not logged at all:\n%s", out)
	}
	for _, s := range []string{typed, strings.ToLower(typed), pw} {
		if strings.Contains(out, s) {
			t.Fatalf("the log holds %q typed into the form:\n%s", s, out)
		}
	}
}
