package oauth

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/runos/vpn/api"
)

// The device page (RFC 8628 §3.3) has two steps: the user code with the
// same username and password form as the browser sign-in (and the same
// slow-down), then an explicit Approve or Deny naming the app and the code,
// so that a code someone else sent cannot be approved by accident.

// approveTTL bounds the time between signing in and pressing Approve.
const approveTTL = 5 * time.Minute

// devicePage is GET /oauth/device[?user_code=…].
func (s *Server) devicePage(w http.ResponseWriter, r *http.Request) {
	vs, _ := url.ParseQuery(r.URL.RawQuery)
	code := vs.Get("user_code")
	if n := normalizeUserCode(code); n != "" {
		code = n
	} else if len(code) > 16 {
		code = ""
	}
	s.renderDeviceLogin(w, r, http.StatusOK, code, "", "")
}

func (s *Server) renderDeviceLogin(w http.ResponseWriter, r *http.Request, status int, userCode, username, errMsg string) {
	nonce := s.csrfNonce(w, r)
	p := page{
		Title:    "Sign in a device",
		Intro:    "Enter the code your device shows, then sign in to RunOS.",
		Error:    errMsg,
		Action:   api.PathDeviceVerify,
		AskCode:  true,
		UserCode: userCode,
		AskLogin: true,
		Username: username,
		Hidden:   []hidden{{"csrf", s.csrfToken(nonce, "device", s.now(), s.cfg.PageTTL)}},
		Buttons:  []button{{Value: "login", Label: "Continue"}},
	}
	formAction := ""
	if s.cfg.Upstream != nil {
		s.offerUpstream(r, &p, "login")
		formAction = " " + s.upstreamOrigin
	}
	s.writePage(w, status, p, formAction)
}

// deviceSubmit is POST /oauth/device: either the login step or the
// approve/deny step.
func (s *Server) deviceSubmit(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	p, err := readForm(w, r)
	if err != nil {
		s.renderMessage(w, http.StatusBadRequest, "Sign-in failed", "The form could not be read: "+err.Error()+".")
		return
	}
	switch p["action"] {
	case "approve", "deny":
		s.deviceDecide(w, r, p, now)
	default:
		s.deviceLogin(w, r, p, now)
	}
}

func (s *Server) deviceLogin(w http.ResponseWriter, r *http.Request, p params, now time.Time) {
	username, typed := strings.TrimSpace(p["username"]), p["user_code"]
	again := func(status int, msg string) { s.renderDeviceLogin(w, r, status, typed, username, msg) }
	if err := s.checkCSRF(r, p["csrf"], "device", now); err != nil {
		s.log.Info("oauth: device form refused", "reason", err, "addr", r.RemoteAddr)
		again(http.StatusForbidden, "This form expired or was not opened in this browser. Enter the code and sign in again.")
		return
	}
	if len(typed) > 32 {
		typed = ""
	}
	// A wrong user code counts against the address like a wrong password:
	// codes are short enough that guessing them must stay slow. The
	// attempt holds its place from here; a valid code gives it back.
	a, slowed := s.slowDown(w, r, now, "", again)
	if slowed {
		return
	}
	userCode := normalizeUserCode(typed)
	d, status, msg := s.pendingDevice(r, userCode, now)
	if msg != "" {
		if status >= 500 {
			a.ok(r.Context(), now) // not the user's fault
		} else {
			s.cfg.Metrics.Refused("bad_user_code")
		}
		again(status, msg)
		return
	}
	a.ok(r.Context(), now)
	typed = userCode
	if p["action"] == "upstream" && s.cfg.Upstream != nil {
		s.startUpstream(w, r, upstreamPending{userCode: userCode}, now)
		return
	}
	user, ok := s.checkLogin(w, r, now, username, p["password"], again)
	if !ok {
		return
	}
	s.renderApprove(w, r, d, userCode, user, now)
}

// renderApprove asks user, signed in, to approve or deny the device
// waiting for userCode.
func (s *Server) renderApprove(w http.ResponseWriter, r *http.Request, d DeviceCode, userCode, user string, now time.Time) {
	nonce := s.csrfNonce(w, r)
	s.writePage(w, http.StatusOK, page{
		Title:    "Approve this sign-in?",
		Intro:    "Signed in as " + user + ". Approve only if you started this sign-in yourself and " + clientName(d.ClientID) + " on your device shows this code:",
		ShowCode: userCode,
		Action:   api.PathDeviceVerify,
		Hidden: []hidden{
			{"user_code", userCode},
			{"user", user},
			{"ticket", s.csrfToken(nonce, "approve", now, approveTTL, userCode, user)},
		},
		Buttons: []button{{Value: "approve", Label: "Approve"}, {Value: "deny", Label: "Deny", Secondary: true}},
	}, "")
}

// pendingDevice finds the device waiting for userCode; when there is none
// it returns the page's status and the message to show.
func (s *Server) pendingDevice(r *http.Request, userCode string, now time.Time) (DeviceCode, int, string) {
	if userCode == "" {
		return DeviceCode{}, http.StatusBadRequest, "That is not a valid code. Check the code your device shows: 8 letters, like BCDF-GHJK."
	}
	d, err := s.cfg.Store.DeviceCodeByUserCode(r.Context(), userCode)
	switch {
	case errors.Is(err, ErrNotFound):
		return d, http.StatusBadRequest, "That code is not valid or has expired. Check the code your device shows, or start the sign-in again there."
	case err != nil:
		id := s.internal(r, "read device code", err)
		return d, http.StatusInternalServerError, "RunOS could not look up the code right now (request " + id + "). Try again in a moment."
	case !now.Before(d.ExpiresAt):
		return d, http.StatusBadRequest, "That code has expired. Start the sign-in again on your device."
	case d.Approved || d.Denied:
		return d, http.StatusBadRequest, "That code was already used. Start the sign-in again on your device."
	}
	return d, http.StatusOK, ""
}

func (s *Server) deviceDecide(w http.ResponseWriter, r *http.Request, p params, now time.Time) {
	userCode, user := p["user_code"], p["user"]
	if err := s.checkCSRF(r, p["ticket"], "approve", now, userCode, user); err != nil {
		s.log.Info("oauth: device approval refused", "reason", err, "addr", r.RemoteAddr)
		s.renderDeviceLogin(w, r, http.StatusForbidden, userCode, user, "This approval expired or was not opened in this browser. Sign in again.")
		return
	}
	if _, status, msg := s.pendingDevice(r, userCode, now); msg != "" {
		s.renderMessage(w, status, "Device not signed in", msg)
		return
	}
	approve := p["action"] == "approve"
	// One conditional update: decided once, and never undone by a poll.
	d, err := s.cfg.Store.DecideDeviceCode(r.Context(), userCode, user, approve, now)
	if errors.Is(err, ErrNotFound) {
		s.renderMessage(w, http.StatusBadRequest, "Device not signed in", "That code was already used or has expired. Start the sign-in again on your device.")
		return
	}
	if err != nil {
		id := s.internal(r, "record a device sign-in decision", err)
		s.renderMessage(w, http.StatusInternalServerError, "Device not signed in", "RunOS could not record your answer (request "+id+"). Start the sign-in again on your device.")
		return
	}
	s.log.Info("oauth: device sign-in decided", "user", user, "client", d.ClientID, "approved", approve, "addr", r.RemoteAddr)
	if approve {
		s.renderMessage(w, http.StatusOK, "Device signed in", "You can close this page and return to your device.")
		return
	}
	s.renderMessage(w, http.StatusOK, "Sign-in denied", "Your device was not signed in. You can close this page.")
}

func clientName(id string) string {
	if n, ok := clients[id]; ok {
		return n
	}
	return id
}
