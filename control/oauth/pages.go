package oauth

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"strconv"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/reqid"
)

//go:embed page.html
var pageHTML string

//go:embed page.css
var pageCSS string

var pageTmpl = template.Must(template.New("page").Parse(pageHTML))

// cssSource is the CSP source allowing exactly the embedded stylesheet and
// nothing else inline.
var cssSource = func() string {
	h := sha256.Sum256([]byte(pageCSS))
	return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
}()

type hidden struct{ Name, Value string }

type button struct {
	Value, Label string
	Secondary    bool // a way out: skips the browser's required-field check
}

// page is everything a page of the sign-in can show.
type page struct {
	Title    string
	Intro    string
	ShowCode string // a user code to compare, shown large
	Error    string
	Action   string // form action; empty: no form
	Hidden   []hidden
	AskCode  bool // the device page's code field
	UserCode string
	AskLogin bool // username and password fields
	Username string
	Buttons  []button
	CSS      template.CSS
}

// writePage sends p with the headers every sign-in page carries.
// formAction lists where its form may post to and be redirected to.
func (s *Server) writePage(w http.ResponseWriter, status int, p page, formAction string) {
	p.CSS = template.CSS(pageCSS)
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, p); err != nil {
		s.log.Error("oauth: render page", "requestId", w.Header().Get(reqid.Header), "err", err)
		http.Error(w, "sign-in page failed to render (request "+w.Header().Get(reqid.Header)+")", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src "+cssSource+
		"; form-action 'self'"+formAction+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: the pages' URLs never leave control
	// (the loopback redirect and any link elsewhere get no Referer), yet
	// browsers keep sending the real Origin on the form's POST, which
	// checkCSRF verifies; under no-referrer they send "Origin: null".
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderMessage shows a page with no form.
func (s *Server) renderMessage(w http.ResponseWriter, status int, title, text string) {
	p := page{Title: title}
	if status >= 400 {
		p.Error = text
	} else {
		p.Intro = text
	}
	s.writePage(w, status, p, "")
}

func loginIntro(clientID string) string {
	if clientID == api.ClientConsole {
		return "Sign in to see and manage your VPN in the RunOS console."
	}
	return "Sign in to connect " + clientName(clientID) + " on this computer."
}

// renderLogin shows the login form of an authorization request, with a
// fresh CSRF token bound to it and this browser.
func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, a authRequest, username, errMsg string) {
	nonce := s.csrfNonce(w, r)
	p := page{
		Title:    "Sign in to RunOS",
		Intro:    loginIntro(a.ClientID),
		Error:    errMsg,
		Action:   "/oauth/authorize",
		AskLogin: true,
		Username: username,
		Hidden: []hidden{
			{"client_id", a.ClientID},
			{"redirect_uri", a.RedirectURI},
			{"response_type", "code"},
			{"code_challenge", a.Challenge},
			{"code_challenge_method", "S256"},
			{"state", a.State},
			{"csrf", s.csrfToken(nonce, "authorize", s.now(), s.cfg.PageTTL, a.csrfFields()...)},
		},
		Buttons: []button{{Value: "login", Label: "Sign in"}, {Value: "cancel", Label: "Cancel", Secondary: true}},
	}
	formAction := " " + loopbackOrigin(a.redirect)
	if a.ClientID == api.ClientConsole {
		formAction = "" // back to control itself: 'self'
	}
	if s.cfg.Upstream != nil {
		// First: the way most of a team signs in once a provider is set.
		s.offerUpstream(r, &p, "login")
		formAction += " " + s.upstreamOrigin // the form's answer redirects there
	}
	s.writePage(w, status, p, formAction)
}
