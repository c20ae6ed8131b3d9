// Package oidctest runs a real OpenID Connect provider for tests and for
// the lab's identity provider host (lab/idp.go): zitadel/oidc's maintained
// provider (pkg/op) over the in-memory storage of its example server, with
// users who have a password and groups, a login page a plain HTTP client
// or Chromium can fill in, and users that can be removed while signed in —
// or disabled while signed in — after which the provider refuses their
// refresh tokens (invalid_grant), as Okta, Entra ID or Keycloak do for a
// disabled user — and a provider that can be taken down for a while.
//
// It is not a provider to deploy: passwords are kept in clear, all state
// is in memory, and one process serves one issuer.
package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"

	"github.com/runos/vpn/internal/testcert"
)

// GroupsClaim is the claim the provider puts the user's groups in.
const GroupsClaim = "groups"

// User is a user of the provider; Email is also the login name.
type User struct {
	Email    string   `json:"email"`
	Password string   `json:"password"`
	Groups   []string `json:"groups"`
}

// Client is a relying party registered at the provider (a web client:
// client secret, code flow with PKCE, refresh tokens).
type Client struct {
	ID           string   `json:"id"`
	Secret       string   `json:"secret"`
	RedirectURIs []string `json:"redirectUris"`
}

// Provider is a running provider.
type Provider struct {
	Issuer  string
	Handler http.Handler
	users   *users
	lean    *atomic.Bool
	down    *atomic.Bool
	refused *atomic.Int64
}

// New makes the provider of issuer (its handler serves the issuer's root),
// logging to log.
func New(issuer string, clients []Client, us []User, log *slog.Logger) (*Provider, error) {
	u := &users{byID: map[string]*storage.User{}}
	for _, x := range us {
		u.add(x)
	}
	cs := map[string]*storage.Client{}
	for _, c := range clients {
		cs[c.ID] = storage.WebClient(c.ID, c.Secret, c.RedirectURIs...)
	}
	lean := new(atomic.Bool)
	st := &store{Storage: storage.NewStorageWithClients(u, cs), users: u, lean: lean}
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, err
	}
	prov, err := op.NewProvider(&op.Config{
		CryptoKey:             key,
		CryptoKeyId:           "k1",
		CodeMethodS256:        true,
		AuthMethodPost:        true,
		GrantTypeRefreshToken: true,
		SupportedUILocales:    []language.Tag{language.English},
		SupportedScopes:       []string{oidc.ScopeOpenID, oidc.ScopeEmail, oidc.ScopeProfile, oidc.ScopeOfflineAccess, GroupsClaim},
	}, st, op.StaticIssuer(issuer), op.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("identity provider %s: %w", issuer, err)
	}
	mux := http.NewServeMux()
	login := &loginPage{store: st, callback: op.AuthCallbackURL(prov)}
	mux.Handle("/login/username", op.NewIssuerInterceptor(prov.IssuerFromRequest).Handler(login))
	mux.Handle("/", prov)
	p := &Provider{Issuer: issuer, users: u, lean: lean, down: new(atomic.Bool), refused: new(atomic.Int64)}
	p.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			p.refused.Add(1)
			hangUp(w)
			return
		}
		mux.ServeHTTP(w, r)
	})
	return p, nil
}

// Serve runs a provider on 127.0.0.1 over HTTPS with the certificate
// (clients reach it with cert.Client()) until the test ends.
func Serve(tb testing.TB, cert testcert.Cert, clients []Client, us []User) *Provider {
	tb.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS(tb)}}
	p, err := New("https://"+srv.Listener.Addr().String(), clients, us, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	srv.Config.Handler = p.Handler
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	return p
}

// AddUser adds a user, or replaces the one with that email.
func (p *Provider) AddUser(u User) { p.users.add(u) }

// LeanIDTokens makes the provider put nothing but the subject in ID
// tokens, the email and groups only at the userinfo endpoint, as some
// providers do unless told otherwise.
func (p *Provider) LeanIDTokens(on bool) { p.lean.Store(on) }

// RemoveUser removes a user: their tokens are refused from then on.
func (p *Provider) RemoveUser(email string) { p.users.remove(email) }

// DisableUser disables a user (or enables them again): a disabled user
// cannot sign in and their refresh tokens are refused, as a removed one's,
// but they keep their subject and groups.
func (p *Provider) DisableUser(email string, disabled bool) { p.users.disable(email, disabled) }

// Down makes the provider unreachable (or reachable again): every
// connection is closed without an answer, as by a provider that is down.
func (p *Provider) Down(down bool) { p.down.Store(down) }

// Unanswered is how many requests came while the provider was down.
func (p *Provider) Unanswered() int64 { return p.refused.Load() }

// hangUp closes the request's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// users is the provider's user store (storage.UserStore), changed while
// the provider runs.
type users struct {
	mu       sync.Mutex
	byID     map[string]*storage.User
	groups   map[string][]string // by ID
	disabled map[string]bool     // by ID
}

// The user's ID is their email: a removed user added again is the same
// subject, as at a provider that re-enables an account.
func (u *users) add(x User) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.groups == nil {
		u.groups = map[string][]string{}
	}
	id := strings.ToLower(x.Email)
	u.byID[id] = &storage.User{ID: id, Username: id, Password: x.Password, Email: x.Email, EmailVerified: true,
		FirstName: x.Email, PreferredLanguage: language.English}
	u.groups[id] = slices.Clone(x.Groups)
}

func (u *users) remove(email string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.byID, strings.ToLower(email))
}

func (u *users) disable(email string, disabled bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.disabled == nil {
		u.disabled = map[string]bool{}
	}
	u.disabled[strings.ToLower(email)] = disabled
}

// GetUserByID finds no disabled user: the provider neither signs them in
// nor refreshes their tokens.
func (u *users) GetUserByID(id string) *storage.User {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.disabled[id] {
		return nil
	}
	return u.byID[id]
}

func (u *users) GetUserByUsername(name string) *storage.User {
	return u.GetUserByID(strings.ToLower(name))
}

func (u *users) ExampleClientID() string { return storage.ServiceUserID }

func (u *users) groupsOf(id string) ([]string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.byID[id] == nil || u.disabled[id] {
		return nil, false
	}
	return slices.Clone(u.groups[id]), true
}

// store is the example storage with what a team's provider adds: the
// groups claim, the user's claims in the ID token, no refresh for a user
// who is gone.
type store struct {
	*storage.Storage
	users *users
	lean  *atomic.Bool
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return client{c, s.lean}, nil
}

func (s *store) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if s.lean.Load() { // the subject alone
		return s.Storage.SetUserinfoFromRequest(ctx, info, req, []string{oidc.ScopeOpenID})
	}
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	return s.addGroups(info, req.GetSubject(), scopes)
}

func (s *store) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	return s.addGroups(info, info.Subject, []string{GroupsClaim})
}

func (s *store) addGroups(info *oidc.UserInfo, subject string, scopes []string) error {
	if !slices.Contains(scopes, GroupsClaim) && !slices.Contains(scopes, oidc.ScopeProfile) {
		return nil
	}
	groups, ok := s.users.groupsOf(subject)
	if !ok {
		return fmt.Errorf("user %s not found", subject)
	}
	info.AppendClaims(GroupsClaim, groups)
	return nil
}

// TokenRequestByRefreshToken refuses the refresh token of a removed user.
func (s *store) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	req, err := s.Storage.TokenRequestByRefreshToken(ctx, token)
	if err != nil {
		return nil, err
	}
	if s.users.GetUserByID(req.GetSubject()) == nil {
		return nil, fmt.Errorf("user %s was removed", req.GetSubject())
	}
	return req, nil
}

// client is the example's web client with the user's claims (email,
// groups) in the ID token, as most providers send them, and the groups
// scope allowed.
type client struct {
	op.Client
	lean *atomic.Bool
}

func (c client) IDTokenUserinfoClaimsAssertion() bool { return !c.lean.Load() }

func (c client) IsScopeAllowed(scope string) bool {
	return scope == GroupsClaim || c.Client.IsScopeAllowed(scope)
}

var loginForm = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Sign in</title></head>
<body><form method="POST" action="/login/username">
<input type="hidden" name="id" value="{{.ID}}">
<label>Email <input id="username" name="username" autocomplete="username"></label>
<label>Password <input id="password" name="password" type="password" autocomplete="current-password"></label>
<p id="error">{{.Error}}</p>
<button id="submit" type="submit">Sign in</button>
</form></body></html>
`))

// loginPage asks for the email and password of the auth request's user,
// then hands the request back to the provider, which redirects to the
// client with a code.
type loginPage struct {
	store    *store
	callback func(context.Context, string) string
}

func (l *loginPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	data := struct{ ID, Error string }{ID: r.FormValue("authRequestID")}
	if r.Method == http.MethodPost {
		data.ID = r.FormValue("id")
		err := l.store.CheckUsernamePassword(r.FormValue("username"), r.FormValue("password"), data.ID)
		if err == nil {
			http.Redirect(w, r, l.callback(r.Context(), data.ID), http.StatusFound)
			return
		}
		data.Error = err.Error()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if data.Error != "" {
		w.WriteHeader(http.StatusUnauthorized)
	}
	_ = loginForm.Execute(w, data)
}
