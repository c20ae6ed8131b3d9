package oauth

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/token"
)

// Limits on what a login form may carry; past them the attempt is wrong.
const (
	maxUsername = 320 // the longest email address
	maxPassword = 1024
	maxState    = 1024
)

// authRequest is a checked authorization request (RFC 6749 §4.1.1 with
// RFC 7636 §4.3).
type authRequest struct {
	ClientID    string
	RedirectURI string
	Challenge   string // S256 code_challenge
	State       string
	redirect    *url.URL
}

// csrfFields are what a login page's CSRF token is bound to.
func (a authRequest) csrfFields() []string {
	return []string{a.ClientID, a.RedirectURI, a.Challenge, a.State}
}

// authError is a refused authorization request. With a trusted redirect
// URI it goes back to the client as error and error_description (RFC 6749
// §4.1.2.1); without one it is shown on a page and never redirected.
type authError struct {
	redirect bool
	code     string // OAuth error code, when redirect
	desc     string
}

// one returns the single value of key, or an error if it is repeated.
func one(vs url.Values, key string) (string, bool) {
	v := vs[key]
	if len(v) > 1 {
		return "", false
	}
	if len(v) == 0 {
		return "", true
	}
	return v[0], true
}

// parseAuthRequest checks an authorization request, in the order RFC 6749
// §4.1.2.1 needs: client and redirect URI first (refused on a page), then
// everything else (refused by redirect). The native apps redirect to a
// loopback listener (RFC 8252); the console, control's own page, only to
// consoleRedirect, exactly.
func parseAuthRequest(vs url.Values, consoleRedirect string) (authRequest, *authError) {
	var a authRequest
	clientID, ok := one(vs, "client_id")
	if !ok || clientID == "" {
		return a, &authError{desc: "The request does not say which app is signing in (client_id)."}
	}
	if _, known := clients[clientID]; !known {
		return a, &authError{desc: fmt.Sprintf("The app %q is not known to RunOS.", clientID)}
	}
	raw, ok := one(vs, "redirect_uri")
	if !ok {
		return a, &authError{desc: "redirect_uri is given more than once."}
	}
	var redirect *url.URL
	var err error
	if clientID == api.ClientConsole {
		redirect, err = checkConsoleRedirect(raw, consoleRedirect)
	} else {
		redirect, err = checkRedirectURI(raw)
	}
	if err != nil {
		return a, &authError{desc: "This sign-in link is not valid: " + err.Error() + "."}
	}
	a = authRequest{ClientID: clientID, RedirectURI: raw, redirect: redirect}
	refuse := func(code, desc string) (authRequest, *authError) {
		return a, &authError{redirect: true, code: code, desc: desc}
	}
	for k, v := range vs {
		if len(v) > 1 {
			return refuse("invalid_request", "parameter "+k+" is given more than once")
		}
	}
	a.State = vs.Get("state")
	if len(a.State) > maxState {
		a.State = ""
		return refuse("invalid_request", "state is longer than "+strconv.Itoa(maxState)+" bytes")
	}
	switch rt := vs.Get("response_type"); rt {
	case "code":
	case "":
		return refuse("invalid_request", "response_type is missing")
	default:
		return refuse("unsupported_response_type", "only response_type=code is supported")
	}
	if m := vs.Get("code_challenge_method"); m != "S256" {
		return refuse("invalid_request", "PKCE is required: code_challenge_method must be S256")
	}
	a.Challenge = vs.Get("code_challenge")
	if !validChallenge(a.Challenge) {
		return refuse("invalid_request", "code_challenge must be the base64url SHA-256 of the code verifier (43 characters)")
	}
	return a, nil
}

func validChallenge(c string) bool {
	b, err := base64.RawURLEncoding.DecodeString(c)
	return err == nil && len(b) == sha256.Size && len(c) == 43
}

// refuseAuth answers a bad authorization request.
func (s *Server) refuseAuth(w http.ResponseWriter, r *http.Request, a authRequest, e *authError) {
	if !e.redirect {
		s.log.Info("oauth: authorization request refused", "reason", e.desc, "addr", r.RemoteAddr)
		s.renderMessage(w, http.StatusBadRequest, "Sign-in cannot start", e.desc+" Start the sign-in again from the RunOS app.")
		return
	}
	s.log.Info("oauth: authorization request refused", "client", a.ClientID, "error", e.code, "reason", e.desc)
	q := url.Values{"error": {e.code}, "error_description": {e.desc}, "iss": {s.issuer.String()}}
	if a.State != "" {
		q.Set("state", a.State)
	}
	http.Redirect(w, r, withParams(a.redirect, q), http.StatusFound)
}

// authorizePage is GET /oauth/authorize: check the request, show the form.
func (s *Server) authorizePage(w http.ResponseWriter, r *http.Request) {
	vs, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.renderMessage(w, http.StatusBadRequest, "Sign-in cannot start", "This sign-in link is garbled. Start the sign-in again from the RunOS app.")
		return
	}
	a, aerr := parseAuthRequest(vs, s.endpoint(ConsoleCallback))
	if aerr != nil {
		s.refuseAuth(w, r, a, aerr)
		return
	}
	s.renderLogin(w, r, http.StatusOK, a, "", "")
}

// authorizeSubmit is POST /oauth/authorize: the login form.
func (s *Server) authorizeSubmit(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	vs, err := readFormValues(w, r)
	if err != nil {
		s.renderMessage(w, http.StatusBadRequest, "Sign-in failed", "The form could not be read: "+err.Error()+".")
		return
	}
	a, aerr := parseAuthRequest(vs, s.endpoint(ConsoleCallback))
	if aerr != nil {
		s.refuseAuth(w, r, a, aerr)
		return
	}
	username := strings.TrimSpace(vs.Get("username"))
	if err := s.checkCSRF(r, vs.Get("csrf"), "authorize", now, a.csrfFields()...); err != nil {
		s.log.Info("oauth: login form refused", "reason", err, "addr", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusForbidden, a, username, "This sign-in form expired or was not opened in this browser. Sign in again below.")
		return
	}
	switch vs.Get("action") {
	case "cancel":
		s.refuseAuth(w, r, a, &authError{redirect: true, code: "access_denied", desc: "the sign-in was cancelled in the browser"})
		return
	case "upstream":
		if s.cfg.Upstream != nil {
			s.startUpstream(w, r, upstreamPending{a: a}, now)
			return
		}
	}
	user, ok := s.checkLogin(w, r, now, username, vs.Get("password"), func(status int, msg string) {
		s.renderLogin(w, r, status, a, username, msg)
	})
	if !ok {
		return
	}
	s.redirectCode(w, r, a, user, now)
}

// redirectCode sends the browser of user, signed in, back to the app
// with a fresh authorization code.
func (s *Server) redirectCode(w http.ResponseWriter, r *http.Request, a authRequest, user string, now time.Time) {
	code, err := s.issueCode(r, a, user, now)
	if err != nil {
		id := s.internal(r, "store authorization code", err)
		s.renderMessage(w, http.StatusInternalServerError, "Sign-in is unavailable", "RunOS could not finish the sign-in (request "+id+"). Try again in a moment.")
		return
	}
	s.log.Info("oauth: signed in", "user", user, "client", a.ClientID, "addr", r.RemoteAddr)
	q := url.Values{"code": {code}, "iss": {s.issuer.String()}}
	if a.State != "" {
		q.Set("state", a.State)
	}
	http.Redirect(w, r, withParams(a.redirect, q), http.StatusFound)
}

// checkLogin checks a username and password under the slow-down. On any
// refusal it calls again(status, message) to show the form again and
// returns ok=false.
func (s *Server) checkLogin(w http.ResponseWriter, r *http.Request, now time.Time, username, password string,
	again func(status int, msg string)) (user string, ok bool) {
	if username == "" || password == "" {
		again(http.StatusOK, "Enter your email and password.")
		return "", false
	}
	a, slowed := s.slowDown(w, r, now, username, again)
	if slowed {
		return "", false
	}
	good := false
	if len(username) <= maxUsername && len(password) <= maxPassword {
		var err error
		good, err = s.cfg.Backend.CheckPassword(r.Context(), username, password)
		if err != nil {
			id := s.internal(r, "check password", err, "typed", s.typed(username))
			again(http.StatusInternalServerError, "RunOS could not check your password right now (request "+id+"). Try again in a moment.")
			return "", false
		}
	}
	if !good {
		// Counted already, when the attempt reserved its place.
		s.cfg.Metrics.Refused("wrong_password")
		s.log.Info("oauth: wrong password", "typed", s.typed(username), "addr", r.RemoteAddr)
		again(http.StatusOK, "Wrong email or password.")
		return "", false
	}
	a.ok(r.Context(), now)
	return username, true
}

// slowDown reserves an attempt for username (may be empty) from this
// address. When attempts must wait it answers with how long (429 and
// Retry-After) and returns slowed=true; otherwise the caller settles the
// returned attempt with ok when it was right (a wrong one stays counted).
func (s *Server) slowDown(w http.ResponseWriter, r *http.Request, now time.Time, username string, again func(int, string)) (*attempt, bool) {
	wait, a, err := s.reserve(r.Context(), username, r.RemoteAddr, now)
	if err != nil {
		s.log.Error("oauth: count a sign-in attempt", "typed", s.typed(username), "err", err)
		again(http.StatusServiceUnavailable, "RunOS cannot check sign-ins right now. Try again in a moment.")
		return nil, true
	}
	if wait <= 0 {
		return a, false
	}
	secs := int((wait + time.Second - 1) / time.Second)
	s.cfg.Metrics.Refused("throttled")
	s.log.Info("oauth: sign-in slowed down", "typed", s.typed(username), "addr", r.RemoteAddr, "wait", wait)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	again(http.StatusTooManyRequests, fmt.Sprintf("Too many failed sign-in attempts. Wait %s and try again.", plural(secs, "second")))
	return nil, true
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// issueCode stores a fresh single-use code under its hash and returns it.
func (s *Server) issueCode(r *http.Request, a authRequest, user string, now time.Time) (string, error) {
	code := token.New()
	err := s.cfg.Store.PutAuthCode(r.Context(), AuthCode{
		CodeHash:      token.Hash(code),
		ClientID:      a.ClientID,
		RedirectURI:   a.RedirectURI,
		CodeChallenge: a.Challenge,
		User:          user,
		ExpiresAt:     now.Add(s.cfg.CodeTTL),
	})
	return code, err
}

// readFormValues reads a form body keeping repeated keys, so that the
// authorization request's own duplicate check sees them.
func readFormValues(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	p, err := readFormRaw(w, r)
	if err != nil {
		return nil, err
	}
	vs, err := url.ParseQuery(p)
	if err != nil {
		return nil, fmt.Errorf("the parameters are not validly URL-encoded")
	}
	return vs, nil
}
