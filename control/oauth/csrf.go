package oauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"time"
)

// A login page's CSRF token is bound to three things: the browser (a
// random nonce in a SameSite=Strict cookie), the request it was served for
// (the authorization parameters, or the user code) and a deadline. A form
// posted from anywhere else, replayed in another browser, or edited to ask
// for something else fails to verify. Stateless, so replicas sharing
// Config.Secret accept each other's pages.

var errCSRF = errors.New("the sign-in form expired or did not come from this page")

func (s *Server) csrfCookieName() string {
	if s.issuer.Scheme == "https" {
		return "__Host-runos-csrf" // Secure, Path=/, no Domain: the browser enforces it
	}
	return "runos-csrf"
}

// csrfNonce returns the browser's nonce, setting a fresh cookie when it has
// none yet (several tabs share one nonce).
func (s *Server) csrfNonce(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(s.csrfCookieName()); err == nil && validNonce(c.Value) {
		return c.Value
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	nonce := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name:     s.csrfCookieName(),
		Value:    nonce,
		Path:     "/",
		Secure:   s.issuer.Scheme == "https",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
	return nonce
}

func validNonce(v string) bool {
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && len(b) == 16
}

// csrfToken signs purpose and fields for this browser until now+ttl.
func (s *Server) csrfToken(nonce, purpose string, now time.Time, ttl time.Duration, fields ...string) string {
	var exp [8]byte
	binary.BigEndian.PutUint64(exp[:], uint64(now.Add(ttl).Unix()))
	return base64.RawURLEncoding.EncodeToString(append(exp[:], s.csrfMAC(exp[:], nonce, purpose, fields)...))
}

// checkCSRF verifies a posted token against the browser's cookie, the
// request's Origin and the fields it must be bound to.
func (s *Server) checkCSRF(r *http.Request, token, purpose string, now time.Time, fields ...string) error {
	// Browsers send Origin on every form POST; a different one is a
	// cross-site post whatever the token says.
	if o := r.Header.Get("Origin"); o != "" && o != s.issuer.Scheme+"://"+s.issuer.Host {
		return errCSRF
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return errCSRF
	}
	c, err := r.Cookie(s.csrfCookieName())
	if err != nil || !validNonce(c.Value) {
		return errCSRF
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != 8+sha256.Size {
		return errCSRF
	}
	exp := int64(binary.BigEndian.Uint64(raw[:8]))
	if !hmac.Equal(raw[8:], s.csrfMAC(raw[:8], c.Value, purpose, fields)) {
		return errCSRF
	}
	if now.Unix() > exp {
		return errCSRF
	}
	return nil
}

func (s *Server) csrfMAC(exp []byte, nonce, purpose string, fields []string) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write(exp)
	for _, f := range append([]string{purpose, nonce}, fields...) {
		// Length-prefixed, so that no two field lists encode alike.
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	return m.Sum(nil)
}
