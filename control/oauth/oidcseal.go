package oauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/runos/vpn/control/oidc"
)

// A sign-in sent to the identity provider is kept in the browser that
// started it: an HttpOnly cookie named after the sign-in's state, sealed
// (AES-GCM under a key from Config.Secret) because it holds the PKCE
// verifier and the nonce. Replicas sharing the secret finish each other's
// sign-ins, nothing is kept per sign-in on control, and a callback opened
// in another browser than the one that pressed "Sign in with …" (a
// forged or stolen callback link) finds no cookie and is refused.

// sealed is what the cookie holds.
type sealed struct {
	State, Nonce, Verifier string
	ClientID, RedirectURI  string `json:",omitempty"`
	Challenge, AppState    string `json:",omitempty"`
	UserCode               string `json:",omitempty"`
	Expires                int64  // unix seconds
}

// maxStateLen bounds the state a callback may name a cookie by.
const maxStateLen = 64

func (s *Server) upstreamCookie(state string) string {
	name := "runos-oidc-" + state
	if s.issuer.Scheme == "https" {
		return "__Secure-" + name
	}
	return name
}

func (s *Server) sealKey() cipher.AEAD {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("runos oidc pending sign-in"))
	block, _ := aes.NewCipher(m.Sum(nil)) // 32 bytes: AES-256, never fails
	aead, _ := cipher.NewGCM(block)
	return aead
}

// keepUpstream sets the cookie keeping x in the browser.
func (s *Server) keepUpstream(w http.ResponseWriter, x upstreamPending) {
	b, _ := json.Marshal(sealed{State: x.p.State, Nonce: x.p.Nonce, Verifier: x.p.Verifier,
		ClientID: x.a.ClientID, RedirectURI: x.a.RedirectURI, Challenge: x.a.Challenge, AppState: x.a.State,
		UserCode: x.userCode, Expires: x.expires.Unix()})
	aead := s.sealKey()
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	// The state is the additional data: a cookie moved under another name opens to nothing.
	v := aead.Seal(nonce, nonce, b, []byte(x.p.State))
	http.SetCookie(w, &http.Cookie{
		Name: s.upstreamCookie(x.p.State), Value: base64.RawURLEncoding.EncodeToString(v),
		Path: PathOIDCCallback, MaxAge: int(s.cfg.PageTTL / time.Second),
		Secure: s.issuer.Scheme == "https", HttpOnly: true,
		// Lax: the provider's redirect back is a top-level navigation from
		// another site, which Strict would strip the cookie from.
		SameSite: http.SameSiteLaxMode,
	})
}

var errNoPending = errors.New("no sign-in of this browser is waiting for this answer")

// takeUpstream opens the cookie of state and clears it: each is used once.
func (s *Server) takeUpstream(w http.ResponseWriter, r *http.Request, state string, now time.Time) (upstreamPending, error) {
	if state == "" || len(state) > maxStateLen || strings.IndexFunc(state, notAlnum) >= 0 {
		return upstreamPending{}, errNoPending // not a state Start makes, nor a cookie name
	}
	name := s.upstreamCookie(state)
	c, err := r.Cookie(name)
	if err != nil {
		return upstreamPending{}, errNoPending
	}
	http.SetCookie(w, &http.Cookie{Name: name, Path: PathOIDCCallback, MaxAge: -1,
		Secure: s.issuer.Scheme == "https", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	aead := s.sealKey()
	if err != nil || len(raw) < aead.NonceSize() {
		return upstreamPending{}, errNoPending
	}
	b, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(state))
	var x sealed
	if err != nil || json.Unmarshal(b, &x) != nil || x.State != state {
		return upstreamPending{}, errNoPending
	}
	if !now.Before(time.Unix(x.Expires, 0)) {
		return upstreamPending{}, errors.New("the sign-in took too long")
	}
	a, aerr := parseAuthRequest(map[string][]string{"client_id": {x.ClientID}, "redirect_uri": {x.RedirectURI},
		"response_type": {"code"}, "code_challenge_method": {"S256"}, "code_challenge": {x.Challenge}, "state": {x.AppState}},
		s.endpoint(ConsoleCallback))
	if x.UserCode == "" && aerr != nil {
		return upstreamPending{}, errNoPending
	}
	return upstreamPending{p: oidc.Pending{State: x.State, Nonce: x.Nonce, Verifier: x.Verifier}, a: a,
		userCode: x.UserCode, expires: time.Unix(x.Expires, 0)}, nil
}

func notAlnum(r rune) bool {
	return (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9')
}
