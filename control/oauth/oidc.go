package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/runos/vpn/control/oidc"
)

// PathOIDCCallback is where the identity provider sends the browser back
// to: control's redirect URI registered at the provider.
const PathOIDCCallback = "/oauth/oidc/callback"

// Upstream is the identity provider the login page offers
// (control/oidc's relying party).
type Upstream interface {
	Start() (authURL string, p oidc.Pending)
	Finish(ctx context.Context, p oidc.Pending, query url.Values) (oidc.Identity, error)
}

// IdentityBackend is the part of control that takes in a user the
// identity provider signed in: it finds or creates the user and records
// their groups, and returns the user's email as control spells it.
type IdentityBackend interface {
	SignInIdentity(ctx context.Context, id oidc.Identity) (email string, err error)
}

// PasswordBackend is a Backend that can tell whether anyone still signs
// in with a password. With an identity provider configured, the login
// pages show the password form only then; a Backend that is not one keeps
// the form.
type PasswordBackend interface {
	PasswordUsers(ctx context.Context) (bool, error)
}

// askPassword reports whether the login pages show the password form:
// always without an identity provider, and with one while any user has a
// password (when the backend cannot say, the form stays: the password is
// checked all the same).
func (s *Server) askPassword(r *http.Request) bool {
	pb, ok := s.cfg.Backend.(PasswordBackend)
	if s.cfg.Upstream == nil || !ok {
		return true
	}
	some, err := pb.PasswordUsers(r.Context())
	if err != nil {
		s.log.Warn("oauth: whether any user has a password; showing the password form", "err", err)
		return true
	}
	return some
}

// offerUpstream puts "Sign in with …" on p, first, and takes the password
// form off when nobody has a password: the provider's button is then the
// one way in.
func (s *Server) offerUpstream(r *http.Request, p *page, passwordButton string) {
	up := button{Value: "upstream", Label: "Sign in with " + s.cfg.UpstreamName, Secondary: true}
	if s.askPassword(r) {
		p.Buttons = append([]button{up}, p.Buttons...)
		return
	}
	p.AskLogin, p.Username, up.Secondary = false, "", false
	p.Buttons = slices.DeleteFunc(p.Buttons, func(b button) bool { return b.Value == passwordButton })
	p.Buttons = append([]button{up}, p.Buttons...)
}

// upstreamPending is a sign-in sent to the provider: what the provider's
// callback needs (the Pending) and what to continue after it (the
// authorization request of the RunOS app).
type upstreamPending struct {
	p        oidc.Pending
	a        authRequest // the app's request, unless userCode
	userCode string      // the device sign-in to approve, if one
	expires  time.Time
}

// startUpstream sends the browser to the identity provider, to continue
// with x (a checked authorization request, or a device's user code).
func (s *Server) startUpstream(w http.ResponseWriter, r *http.Request, x upstreamPending, now time.Time) {
	authURL, p := s.cfg.Upstream.Start()
	x.p, x.expires = p, now.Add(s.cfg.PageTTL)
	s.keepUpstream(w, x)
	s.log.Info("oauth: sign-in sent to the identity provider", "client", x.a.ClientID, "device", x.userCode != "", "addr", r.RemoteAddr)
	http.Redirect(w, r, authURL, http.StatusFound)
}

// upstreamCallback is GET /oauth/oidc/callback: the provider's answer.
// The user it names is found or created, then the sign-in continues as
// after a right password: a code back to the app, or the device's
// approval page.
func (s *Server) upstreamCallback(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	q := r.URL.Query()
	x, err := s.takeUpstream(w, r, q.Get("state"), now)
	if err != nil {
		s.cfg.Metrics.Refused("unknown_state")
		s.log.Info("oauth: identity provider callback refused", "reason", err, "addr", r.RemoteAddr)
		s.renderMessage(w, http.StatusBadRequest, "Sign-in failed", "This sign-in is not known here or has expired. Start the sign-in again from the RunOS app.")
		return
	}
	id, err := s.cfg.Upstream.Finish(r.Context(), x.p, q)
	if err != nil {
		s.cfg.Metrics.Refused("identity_provider")
		s.log.Info("oauth: identity provider sign-in refused", "err", err, "addr", r.RemoteAddr)
		s.renderMessage(w, http.StatusForbidden, "Sign-in failed", "Signing in through "+s.cfg.UpstreamName+" did not succeed: "+err.Error()+".")
		return
	}
	ib, _ := s.cfg.Backend.(IdentityBackend)
	user, err := ib.SignInIdentity(r.Context(), id)
	if err != nil {
		var refusal Refusal
		if errors.As(err, &refusal) {
			s.cfg.Metrics.Refused("identity_refused")
			s.log.Info("oauth: identity provider user refused", "user", id.Email, "err", err)
			s.renderMessage(w, http.StatusForbidden, "Sign-in refused", refusal.Error())
			return
		}
		rid := s.internal(r, "take in a user signed in by the identity provider", err)
		s.renderMessage(w, http.StatusInternalServerError, "Sign-in is unavailable", "RunOS could not finish the sign-in (request "+rid+"). Try again in a moment.")
		return
	}
	if x.userCode == "" {
		s.redirectCode(w, r, x.a, user, now)
		return
	}
	// A device sign-in: still waiting? Then the same explicit approval as
	// after a password.
	d, status, msg := s.pendingDevice(r, x.userCode, now)
	if msg != "" {
		s.renderMessage(w, status, "Device not signed in", msg)
		return
	}
	s.renderApprove(w, r, d, x.userCode, user, now)
}

// Refusal is an IdentityBackend's refusal of a user, its text for the
// user's eyes (what to ask for), not an internal error.
type Refusal string

func (r Refusal) Error() string { return string(r) }

// useUpstream checks the Upstream configuration and serves its callback.
func (s *Server) useUpstream(mux *http.ServeMux) error {
	if s.cfg.Upstream == nil {
		return nil
	}
	if _, ok := s.cfg.Backend.(IdentityBackend); !ok {
		return errors.New("oauth: an Upstream needs a Backend that is an IdentityBackend")
	}
	if s.cfg.UpstreamName == "" {
		s.cfg.UpstreamName = "your identity provider"
	}
	// The login form's answer redirects to the provider, which the page's
	// form-action must allow: its origin, from a sign-in URL never used.
	authURL, _ := s.cfg.Upstream.Start()
	u, err := url.Parse(authURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("oauth: the identity provider's sign-in URL %q is not absolute", authURL)
	}
	s.upstreamOrigin = u.Scheme + "://" + u.Host
	mux.HandleFunc("GET "+PathOIDCCallback, s.upstreamCallback)
	return nil
}
