package oidc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/runos/vpn/internal/secretfile"
)

// ErrGone is the provider's answer that a user's grant is no more: the
// user was removed or disabled, their sessions ended, or the refresh token
// expired or was revoked (invalid_grant). Control ends the user's sessions
// on it; any other refresh error (the provider unreachable, a 5xx) says
// nothing about the user.
var ErrGone = errors.New("the identity provider no longer accepts this user's sign-in")

// Upstream is control's relying party at its provider.
type Upstream struct {
	cfg      Config
	client   *http.Client
	provider *gooidc.Provider
	verifier *gooidc.IDTokenVerifier
	oauth    oauth2.Config
}

// New reads the provider's discovery document and returns the relying
// party whose callback is redirectURL (control's own route). client is
// how control reaches the provider (nil: http.DefaultClient).
func New(ctx context.Context, cfg Config, redirectURL string, client *http.Client) (*Upstream, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if client == nil {
		client = http.DefaultClient
	}
	secret := ""
	if cfg.ClientSecretFile != "" {
		b, err := secretfile.Read(cfg.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	p, err := gooidc.NewProvider(gooidc.ClientContext(ctx, client), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("identity provider %s: %w", cfg.Issuer, err)
	}
	return &Upstream{
		cfg:      cfg,
		client:   client,
		provider: p,
		verifier: p.Verifier(&gooidc.Config{ClientID: cfg.ClientID}),
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: secret, Endpoint: p.Endpoint(),
			RedirectURL: redirectURL, Scopes: cfg.scopes()},
	}, nil
}

// Pending is a sign-in between the redirect to the provider and the
// callback. Control keeps it (with its own authorization request) under
// State, the one value that comes back in the callback's query, and
// hands it to Finish; it is a secret until then.
type Pending struct {
	State    string
	Nonce    string
	Verifier string // the PKCE code verifier
}

// Start begins a sign-in: the provider's URL to send the browser to and
// the pending sign-in to keep until the callback.
func (u *Upstream) Start() (authURL string, p Pending) {
	p = Pending{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier()}
	return u.oauth.AuthCodeURL(p.State, gooidc.Nonce(p.Nonce), oauth2.S256ChallengeOption(p.Verifier)), p
}

// Identity is who signed in, as the provider says.
type Identity struct {
	Subject string // the provider's ID for the user, stable across email changes
	Email   string // lowercase
	Groups  []string
	// RefreshToken is what Refresh takes to ask about the user later;
	// "" when the provider issued none (then the user cannot be checked,
	// and control should refuse the sign-in or end it at the session's
	// end). A provider that rotates refresh tokens returns the new one.
	RefreshToken string
	// Expiry is the ID token's: the provider's word is good until then.
	Expiry time.Time
}

// Finish completes a sign-in at the callback: the callback's query, the
// pending sign-in its state names. It checks the state, exchanges the code
// with the PKCE verifier, verifies the ID token (signature, issuer,
// audience, expiry, nonce) and reads the email and groups from it (from
// the userinfo endpoint when the token leaves them out).
func (u *Upstream) Finish(ctx context.Context, p Pending, query url.Values) (Identity, error) {
	if e := query.Get("error"); e != "" {
		return Identity{}, fmt.Errorf("the identity provider refused the sign-in: %s %s", e, query.Get("error_description"))
	}
	if st := query.Get("state"); p.State == "" || subtle.ConstantTimeCompare([]byte(st), []byte(p.State)) != 1 {
		return Identity{}, errors.New("sign-in callback does not belong to this sign-in (state differs): start the sign-in again")
	}
	code := query.Get("code")
	if code == "" {
		return Identity{}, errors.New("sign-in callback without a code: start the sign-in again")
	}
	ctx = gooidc.ClientContext(ctx, u.client)
	tok, err := u.oauth.Exchange(ctx, code, oauth2.VerifierOption(p.Verifier))
	if err != nil {
		return Identity{}, fmt.Errorf("exchange the sign-in code at %s: %w", u.cfg.Issuer, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, fmt.Errorf("%s answered the code without an ID token", u.cfg.Issuer)
	}
	idt, err := u.verifier.Verify(ctx, raw)
	if err != nil {
		return Identity{}, fmt.Errorf("ID token from %s: %w", u.cfg.Issuer, err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(p.Nonce)) != 1 {
		return Identity{}, fmt.Errorf("ID token from %s is not for this sign-in (nonce differs)", u.cfg.Issuer)
	}
	return u.identity(ctx, idt, tok)
}

// Refresh asks the provider about a signed-in user through their refresh
// token. errors.Is(err, ErrGone): the user is no longer to be let in. The
// Identity has the rotated refresh token (the old one when the provider
// keeps it) and, when the provider sent a new ID token, the user's email
// and groups as they are now; the caller checks its Subject is the user's.
func (u *Upstream) Refresh(ctx context.Context, refreshToken string) (Identity, error) {
	ctx = gooidc.ClientContext(ctx, u.client)
	tok, err := u.oauth.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			return Identity{}, fmt.Errorf("%w (%s: %s)", ErrGone, u.cfg.Issuer, re.ErrorDescription)
		}
		return Identity{}, fmt.Errorf("refresh at %s: %w", u.cfg.Issuer, err)
	}
	id := Identity{RefreshToken: refreshToken, Expiry: tok.Expiry}
	raw, _ := tok.Extra("id_token").(string)
	if raw != "" {
		idt, err := u.verifier.Verify(ctx, raw)
		if err != nil {
			return Identity{}, fmt.Errorf("ID token from %s on refresh: %w", u.cfg.Issuer, err)
		}
		if id, err = u.identity(ctx, idt, tok); err != nil {
			return Identity{}, err
		}
	}
	if tok.RefreshToken != "" {
		id.RefreshToken = tok.RefreshToken
	}
	return id, nil
}
