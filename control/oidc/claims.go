package oidc

import (
	"context"
	"fmt"
	"strings"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// identity reads the user from a verified ID token, asking the userinfo
// endpoint for the email or the groups when the token leaves them out
// (providers differ: Entra ID and Okta put groups in the token only when
// told to, some put nothing but the subject there).
func (u *Upstream) identity(ctx context.Context, idt *gooidc.IDToken, tok *oauth2.Token) (Identity, error) {
	if idt.Subject == "" {
		return Identity{}, fmt.Errorf("ID token from %s names no user (no sub claim)", u.cfg.Issuer)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("ID token from %s: %w", u.cfg.Issuer, err)
	}
	_, hasGroups := lookup(claims, u.cfg.groupsPath())
	if _, hasEmail := claims["email"].(string); (!hasEmail || !hasGroups) && u.provider.UserInfoEndpoint() != "" {
		info, err := u.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			return Identity{}, fmt.Errorf("user info from %s: %w", u.cfg.Issuer, err)
		}
		if info.Subject != idt.Subject {
			return Identity{}, fmt.Errorf("user info from %s is about %q, the ID token about %q", u.cfg.Issuer, info.Subject, idt.Subject)
		}
		var more map[string]any
		if err := info.Claims(&more); err != nil {
			return Identity{}, fmt.Errorf("user info from %s: %w", u.cfg.Issuer, err)
		}
		for k, v := range more {
			if _, ok := claims[k]; !ok {
				claims[k] = v
			}
		}
	}
	email, _ := claims["email"].(string)
	if email == "" {
		return Identity{}, fmt.Errorf("%s sent no email for user %s: allow control the email scope", u.cfg.Issuer, idt.Subject)
	}
	// An address the provider has not verified could be anyone's, and
	// RunOS users are known by email: refuse it. A provider that sends no
	// email_verified at all (Entra ID) vouches for its addresses.
	if v, ok := claims["email_verified"]; ok && (v == false || v == "false") {
		return Identity{}, fmt.Errorf("%s has not verified the email %s: verify it there, then sign in again", u.cfg.Issuer, email)
	}
	groups, err := u.groups(claims)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Subject: idt.Subject, Email: strings.ToLower(email), Groups: groups,
		RefreshToken: tok.RefreshToken, Expiry: idt.Expiry}, nil
}

// groups reads the groups claim: a list of names, or one name. No claim
// is no groups.
func (u *Upstream) groups(claims map[string]any) ([]string, error) {
	v, ok := lookup(claims, u.cfg.groupsPath())
	if !ok || v == nil {
		return nil, nil
	}
	bad := fmt.Errorf("claim %s from %s is not a list of group names", u.cfg.GroupsClaim, u.cfg.Issuer)
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, g := range v {
			s, ok := g.(string)
			if !ok {
				return nil, bad
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, bad
}

// lookup follows a path of names into nested objects.
func lookup(claims map[string]any, path []string) (any, bool) {
	var v any = claims
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[name]; !ok {
			return nil, false
		}
	}
	return v, true
}
