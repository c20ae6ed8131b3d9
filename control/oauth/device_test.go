package oauth

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth/formlogin"
)

func TestUserCodes(t *testing.T) {
	re := regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`)
	seen := map[string]bool{}
	for range 1000 {
		c := newUserCode()
		if !re.MatchString(c) {
			t.Fatalf("user code %q", c)
		}
		seen[c] = true
	}
	if len(seen) < 990 {
		t.Errorf("only %d distinct codes in 1000", len(seen))
	}
	for in, want := range map[string]string{
		"BCDF-GHJK": "BCDF-GHJK", "bcdfghjk": "BCDF-GHJK", " bcdf ghjk ": "BCDF-GHJK", "BC-DF-GH-JK": "BCDF-GHJK",
		"BCDF-GHJ": "", "BCDF-GHJKL": "", "ABCD-EFGH": "", "BCDF-GHJ1": "", "": "", "ＢCDF-GHJK": "",
	} {
		if got := normalizeUserCode(in); got != want {
			t.Errorf("normalizeUserCode(%q) = %q, want %q", in, got, want)
		}
	}
}

// deviceStart asks for a device code as client.
func (h *harness) deviceStart(client string) map[string]any {
	h.t.Helper()
	a := h.rawPost(api.PathDeviceCode, "application/x-www-form-urlencoded", url.Values{"client_id": {client}}.Encode())
	if a.status != 200 {
		h.t.Fatalf("device code: %d %v", a.status, a.body)
	}
	return a.body
}

func (h *harness) poll(deviceCode string) tokenAnswer {
	h.t.Helper()
	return h.tokenRequest(url.Values{"grant_type": {grantDeviceCode}, "client_id": {api.ClientCLI}, "device_code": {deviceCode}})
}

// deviceLogin fills the device page: code, user, password; returns the
// approval page (or the error page).
func (h *harness) deviceLogin(c *http.Client, userCode, user, password string) testPage {
	h.t.Helper()
	pg := h.get(c, h.srv.URL+api.PathDeviceVerify+"?user_code="+url.QueryEscape(userCode))
	f := pg.form
	f.Set("username", user)
	f.Set("password", password)
	f.Set("action", "login")
	return h.post(c, api.PathDeviceVerify, f, nil)
}

func (h *harness) decide(c *http.Client, approval testPage, action string) testPage {
	h.t.Helper()
	f := approval.form
	f.Set("action", action)
	return h.post(c, api.PathDeviceVerify, f, nil)
}

func TestDeviceCodeResponse(t *testing.T) {
	h := newHarness(t, nil)
	d := h.deviceStart(api.ClientCLI)
	uc, _ := d["user_code"].(string)
	if normalizeUserCode(uc) != uc {
		t.Errorf("user_code %q", uc)
	}
	if d["verification_uri"] != h.srv.URL+"/oauth/device" ||
		d["verification_uri_complete"] != h.srv.URL+"/oauth/device?user_code="+uc ||
		d["expires_in"] != float64(600) || d["interval"] != float64(1) || d["device_code"] == "" {
		t.Errorf("device authorization response %v", d)
	}
	if a := h.rawPost(api.PathDeviceCode, "application/x-www-form-urlencoded", "client_id=evil"); a.status != 401 || a.errCode() != "invalid_client" {
		t.Errorf("unknown client: %d %v", a.status, a.body)
	}
	// The complete URI prefills the code.
	if pg := h.get(h.browser(), d["verification_uri_complete"].(string)); pg.form.Get("user_code") != uc {
		t.Errorf("prefilled code %q, want %q", pg.form.Get("user_code"), uc)
	}
}

// Every state of the device token poll (RFC 8628 §3.5).
func TestDevicePolling(t *testing.T) {
	h := newHarness(t, nil)
	d := h.deviceStart(api.ClientCLI)
	dc, uc := d["device_code"].(string), d["user_code"].(string)

	if a := h.poll(dc); a.errCode() != "authorization_pending" {
		t.Fatalf("first poll: %v", a.body)
	}
	// Polling again at once: slow_down, and the interval grows by 5 s.
	if a := h.poll(dc); a.errCode() != "slow_down" {
		t.Fatalf("fast poll: %v", a.body)
	}
	h.clock.Advance(time.Second)
	if a := h.poll(dc); a.errCode() != "slow_down" {
		t.Fatalf("poll at the old interval after slow_down: %v", a.body)
	}
	// Each slow_down added 5 s: the interval is now 11 s.
	h.clock.Advance(11 * time.Second)
	if a := h.poll(dc); a.errCode() != "authorization_pending" {
		t.Fatalf("poll at the new interval: %v", a.body)
	}
	// Another client's poll of this code.
	a := h.tokenRequest(url.Values{"grant_type": {grantDeviceCode}, "client_id": {api.ClientDesktop}, "device_code": {dc}})
	if a.errCode() != "invalid_grant" {
		t.Fatalf("other client: %v", a.body)
	}
	c := h.browser()
	approval := h.deviceLogin(c, uc, testUser, testPassword)
	if !strings.Contains(approval.body, "Approve this sign-in?") || !strings.Contains(approval.body, uc) || !strings.Contains(approval.body, "the RunOS CLI") {
		t.Fatalf("approval page: %s", approval.body)
	}
	if done := h.decide(c, approval, "approve"); !strings.Contains(done.body, "Device signed in") {
		t.Fatalf("approve: %s", done.body)
	}
	h.clock.Advance(11 * time.Second)
	a = h.poll(dc)
	if a.status != 200 || a.body["token_type"] != "Bearer" || a.body["expires_in"] != float64(86400) {
		t.Fatalf("approved poll: %v", a.body)
	}
	if who := h.backend.sessions[a.body["access_token"].(string)]; who[0] != testUser {
		t.Errorf("session for %v", who)
	}
	// Redeemed once.
	h.clock.Advance(11 * time.Second)
	if a := h.poll(dc); a.errCode() != "invalid_grant" {
		t.Fatalf("poll after redeem: %v", a.body)
	}
	if a := h.poll("made-up"); a.errCode() != "invalid_grant" {
		t.Fatalf("unknown device code: %v", a.body)
	}
	if a := h.tokenRequest(url.Values{"grant_type": {grantDeviceCode}, "client_id": {api.ClientCLI}}); a.errCode() != "invalid_request" {
		t.Fatalf("no device code: %v", a.body)
	}
}

func TestDeviceDenied(t *testing.T) {
	h := newHarness(t, nil)
	d := h.deviceStart(api.ClientCLI)
	c := h.browser()
	approval := h.deviceLogin(c, d["user_code"].(string), testUser, testPassword)
	if done := h.decide(c, approval, "deny"); !strings.Contains(done.body, "Sign-in denied") {
		t.Fatalf("deny: %s", done.body)
	}
	if a := h.poll(d["device_code"].(string)); a.errCode() != "access_denied" {
		t.Fatalf("poll after deny: %v", a.body)
	}
}

func TestDeviceCodeExpires(t *testing.T) {
	h := newHarness(t, nil)
	d := h.deviceStart(api.ClientCLI)
	h.clock.Advance(10 * time.Minute)
	c := h.browser()
	if pg := h.deviceLogin(c, d["user_code"].(string), testUser, testPassword); !strings.Contains(pg.body, "That code has expired.") {
		t.Fatalf("expired code on the page: %s", pg.body)
	}
	if a := h.poll(d["device_code"].(string)); a.errCode() != "expired_token" {
		t.Fatalf("poll after expiry: %v", a.body)
	}
}

func TestDevicePageRefusals(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AddrFailures = 3 })
	d := h.deviceStart(api.ClientCLI)
	uc := d["user_code"].(string)

	t.Run("wrong password", func(t *testing.T) {
		pg := h.deviceLogin(h.browser(), uc, testUser, "wrong")
		if !strings.Contains(pg.body, "Wrong email or password.") || pg.form.Get("user_code") != uc {
			t.Fatalf("%s", pg.body)
		}
	})
	t.Run("no csrf", func(t *testing.T) {
		c := h.browser()
		f := h.get(c, h.srv.URL+api.PathDeviceVerify).form
		f.Del("csrf")
		f.Set("user_code", uc)
		f.Set("username", testUser)
		f.Set("password", testPassword)
		if pg := h.post(c, api.PathDeviceVerify, f, nil); pg.status != http.StatusForbidden {
			t.Fatalf("got %d", pg.status)
		}
	})
	t.Run("approval for another user", func(t *testing.T) {
		c := h.browser()
		approval := h.deviceLogin(c, uc, testUser, testPassword)
		approval.form.Set("user", "bob@example.com")
		if pg := h.decide(c, approval, "approve"); pg.status != http.StatusForbidden {
			t.Fatalf("tampered approval: %d %s", pg.status, pg.body)
		}
	})
	t.Run("approval from another browser", func(t *testing.T) {
		approval := h.deviceLogin(h.browser(), uc, testUser, testPassword)
		other := h.browser()
		h.get(other, h.srv.URL+api.PathDeviceVerify)
		if pg := h.decide(other, approval, "approve"); pg.status != http.StatusForbidden {
			t.Fatalf("approval replayed elsewhere: %d", pg.status)
		}
	})
	if a := h.poll(d["device_code"].(string)); a.errCode() != "authorization_pending" {
		t.Fatalf("the refusals approved something: %v", a.body)
	}
	t.Run("wrong codes slow down", func(t *testing.T) {
		c := h.browser()
		// One wrong password above, so two wrong codes reach the limit of 3.
		for _, bad := range []string{"BCDF-BCDF", "not a code"} {
			if pg := h.deviceLogin(c, bad, testUser, testPassword); pg.status != http.StatusBadRequest || !strings.Contains(pg.body, "code") {
				t.Fatalf("bad code %q: %d %s", bad, pg.status, pg.body)
			}
		}
		if pg := h.deviceLogin(c, uc, testUser, testPassword); pg.status != http.StatusTooManyRequests {
			t.Fatalf("after 3 failures from the address: %d %s", pg.status, pg.body)
		}
	})
}

// A full device sign-in driven by golang.org/x/oauth2 on the real clock,
// the user's part done through the page by the scripted browser.
func TestDeviceFlowWithOAuth2(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Now = time.Now })
	conf := h.oauth2Config(api.ClientDesktop)
	da, err := conf.DeviceAuth(h.ctx())
	if err != nil {
		t.Fatal(err)
	}
	if da.Interval != 1 || da.Expiry.IsZero() || da.VerificationURIComplete == "" {
		t.Fatalf("device auth %+v", da)
	}
	res, err := formlogin.Login(t.Context(), h.srv.Client(), da.VerificationURIComplete, testUser, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Body, "Device signed in") {
		t.Fatalf("scripted browser ended on %s: %s", res.URL, res.Body)
	}
	tok, err := conf.DeviceAccessToken(h.ctx(), da)
	if err != nil {
		t.Fatal(err)
	}
	if who := h.backend.sessions[tok.AccessToken]; who != [2]string{testUser, api.ClientDesktop} {
		t.Fatalf("session %v", who)
	}
}

// hookStore runs hook (once) right after the token poll's first read of a
// device code returns, to land a decision in the middle of the poll.
type hookStore struct {
	GrantStore
	mu   sync.Mutex
	hook func()
}

func (s *hookStore) afterRead() {
	s.mu.Lock()
	f := s.hook
	s.hook = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

func (s *hookStore) DeviceCodeByHash(ctx context.Context, h string) (DeviceCode, error) {
	defer s.afterRead()
	return s.GrantStore.DeviceCodeByHash(ctx, h)
}

func (s *hookStore) PollDeviceCode(ctx context.Context, h string, poll func(DeviceCode) (time.Time, time.Duration)) (DeviceCode, error) {
	defer s.afterRead()
	return s.GrantStore.PollDeviceCode(ctx, h, poll)
}

// An approval made while a token poll is being answered is kept: the poll
// records itself without writing back the code it read.
func TestDeviceApprovalDuringPollKept(t *testing.T) {
	hs := &hookStore{}
	h := newHarness(t, func(c *Config) { hs.GrantStore = c.Store; c.Store = hs })
	d := h.deviceStart(api.ClientCLI)
	dc, uc := d["device_code"].(string), d["user_code"].(string)
	c := h.browser()
	approval := h.deviceLogin(c, uc, testUser, testPassword)
	hs.mu.Lock()
	hs.hook = func() {
		if done := h.decide(c, approval, "approve"); !strings.Contains(done.body, "Device signed in") {
			t.Errorf("approve: %s", done.body)
		}
	}
	hs.mu.Unlock()
	if a := h.poll(dc); a.errCode() != "authorization_pending" {
		t.Fatalf("the poll the approval landed in: %v", a.body)
	}
	h.clock.Advance(time.Second)
	if a := h.poll(dc); a.status != 200 || a.body["token_type"] != "Bearer" {
		t.Fatalf("the next poll: %d %v; the approval was lost", a.status, a.body)
	}
}
