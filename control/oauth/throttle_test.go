package oauth

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/control/api"
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
	// Each wrong password from a different address: only the user counts.
	addr := func(i int) string { return "192.0.2." + string(rune('1'+i)) + ":1000" }
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
