package oauth

import (
	"net/url"
	"testing"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
)

// BenchmarkBrowserSignIn is one whole PKCE sign-in as control serves it
// over TLS: the login page, the form post, the code exchange. The backend
// is a map lookup, so this is the authorization server's own cost; a real
// sign-in adds one bcrypt (cost 12, some 200 ms) in CheckPassword.
func BenchmarkBrowserSignIn(b *testing.B) {
	h := newHarness(b, nil)
	v := oauth2.GenerateVerifier()
	c := h.browser()
	for b.Loop() {
		res := h.login(c, h.authURL(v, nil), testUser, testPassword)
		_, q := res.location(b)
		if a := h.tokenRequest(codeForm(q.Get("code"), v, h.redirect)); a.status != 200 {
			b.Fatalf("exchange: %v", a.body)
		}
	}
}

// BenchmarkDevicePoll is one device token poll answered authorization_pending.
func BenchmarkDevicePoll(b *testing.B) {
	h := newHarness(b, nil)
	var form url.Values
	for i := 0; b.Loop(); i++ {
		if i%250 == 0 { // a fresh code before the fake clock expires this one
			a := h.rawPost(api.PathDeviceCode, "application/x-www-form-urlencoded", url.Values{"client_id": {api.ClientCLI}}.Encode())
			form = url.Values{"grant_type": {grantDeviceCode}, "client_id": {api.ClientCLI}, "device_code": {a.body["device_code"].(string)}}
		}
		h.clock.Advance(2 * h.oauth.cfg.DeviceInterval)
		if r := h.tokenRequest(form); r.errCode() != "authorization_pending" {
			b.Fatalf("poll: %v", r.body)
		}
	}
}
