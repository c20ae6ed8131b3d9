package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/token"
)

// The console's session is a cookie holding the access token of the
// console's own sign-in (client runos-console, as long as any sign-in),
// HttpOnly and, over HTTPS, __Host- and Secure. Its CSRF token is a MAC of
// the session token: a page of this origin has it, another site cannot
// compute it, and no replica has to remember anything.

// loginTTL bounds a sign-in from /console/login to the callback.
const loginTTL = 15 * time.Minute

func (c *Console) secure() bool { return c.issuer.Scheme == "https" }

func (c *Console) cookieName(base string) string {
	if c.secure() {
		return "__Host-" + base // Secure, Path=/, no Domain: the browser enforces it
	}
	return base
}

func (c *Console) setCookie(w http.ResponseWriter, base, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: c.cookieName(base), Value: value, Path: "/", MaxAge: maxAge,
		Secure: c.secure(), HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// sessionToken is the access token of the browser's console session.
func (c *Console) sessionToken(r *http.Request) string {
	ck, err := r.Cookie(c.cookieName("runos-console"))
	if err != nil {
		return ""
	}
	return ck.Value
}

// csrfToken is the session's CSRF token.
func csrfToken(session string) string {
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("runos-console csrf"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var errCSRF = errors.New("this form did not come from your console page (or your session changed): reload the page and try again")

// checkPost verifies that a POST comes from the console's own page: the
// same origin (as browsers say on every POST) and the session's CSRF token.
func (c *Console) checkPost(r *http.Request, session string) error {
	if o := r.Header.Get("Origin"); o != "" && o != c.issuer.Scheme+"://"+c.issuer.Host {
		return errCSRF
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return errCSRF
	}
	if err := r.ParseForm(); err != nil {
		return errCSRF
	}
	got, want := r.PostForm.Get("csrf"), csrfToken(session)
	if session == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errCSRF
	}
	return nil
}

// login starts the authorization-code sign-in with PKCE: state and
// verifier go in a short-lived cookie, the browser to the login page.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	state, verifier := token.New(), oauth2.GenerateVerifier()
	c.setCookie(w, "runos-console-login", state+"."+verifier, int(loginTTL/time.Second))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, c.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), http.StatusSeeOther)
}

// callback finishes the sign-in: the state must be this browser's, the
// code is exchanged with the verifier, the token becomes the session.
func (c *Console) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ck, err := r.Cookie(c.cookieName("runos-console-login"))
	c.setCookie(w, "runos-console-login", "", -1)
	var state, verifier string
	if err == nil {
		state, verifier, _ = strings.Cut(ck.Value, ".")
	}
	switch {
	case q.Get("error") == "access_denied":
		c.message(w, http.StatusOK, "Sign-in cancelled", "You cancelled the sign-in.", true)
		return
	case q.Get("error") != "":
		c.message(w, http.StatusBadRequest, "Sign-in failed", "The sign-in failed: "+q.Get("error_description")+".", true)
		return
	case state == "" || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1:
		c.message(w, http.StatusBadRequest, "Sign-in failed",
			"This sign-in was not started in this browser, or took longer than 15 minutes.", true)
		return
	case q.Get("iss") != "" && q.Get("iss") != c.issuer.String():
		c.message(w, http.StatusBadRequest, "Sign-in failed", "The answer came from another control than this one.", true)
		return
	}
	// In-process, with the browser's address: the sign-in's audit entry names it.
	tok, err := c.oauth.Exchange(oauth2ctx(r, c.token), q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		c.log.Info("console: sign-in refused", "err", err, "addr", r.RemoteAddr)
		c.message(w, http.StatusBadRequest, "Sign-in failed", "The sign-in could not be completed; sign in again.", true)
		return
	}
	maxAge := 0
	if !tok.Expiry.IsZero() {
		maxAge = max(int(tok.Expiry.Sub(c.cfg.Now())/time.Second), 1)
	}
	c.setCookie(w, "runos-console", tok.AccessToken, maxAge)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/console", http.StatusSeeOther)
}

// logout ends the console's session on control.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	tok := c.sessionToken(r)
	if err := c.checkPost(r, tok); err != nil {
		c.message(w, http.StatusForbidden, "Not signed out", err.Error(), false)
		return
	}
	if err := c.client(tok).EndSession(c.ctx(r)); err != nil && !api.IsCode(err, api.CodeUnauthorized) &&
		!api.IsCode(err, api.CodeSessionExpired) && !api.IsCode(err, api.CodeDeviceRevoked) {
		c.message(w, http.StatusBadGateway, "Not signed out", "Control did not end the session: "+err.Error(), false)
		return
	}
	c.setCookie(w, "runos-console", "", -1)
	c.message(w, http.StatusOK, "Signed out", "You are signed out of the RunOS console.", true)
}
