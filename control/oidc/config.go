// Package oidc signs users in to control through the team's own OpenID
// Connect provider (Google Workspace, Okta, Entra ID, Keycloak …), control
// being the relying party: the redirect to the provider (authorization
// code with PKCE, a state and a nonce), the callback exchanging the code
// and verifying the ID token, the user's email and groups read from the
// token (the groups from a configurable claim), and the refresh check that
// tells a user still there from one removed or disabled at the provider.
//
// It keeps nothing: the Pending sign-in between redirect and callback, the
// refresh token and what a user's groups mean are control's to keep and
// decide (control/policy for the groups' rules). It does not serve pages;
// control's sign-in page calls Start and its callback route calls Finish.
package oidc

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/pflag"
)

// Config is how control reaches its provider, from its flags.
type Config struct {
	Issuer           string // the provider's issuer URL (https)
	ClientID         string
	ClientSecretFile string // "": a public client, PKCE alone
	// GroupsClaim is the claim holding the user's groups: a top-level name
	// ("groups") or a path into nested objects ("realm_access.roles").
	GroupsClaim string
	// Scopes asked for. offline_access is what most providers want before
	// they issue the refresh token the removal check depends on.
	Scopes []string
}

// DefaultScopes are the scopes asked for unless --oidc-scopes says.
var DefaultScopes = []string{"openid", "email", "profile", "offline_access"}

// AddFlags registers the --oidc-* flags on a command's flag set.
func (c *Config) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&c.Issuer, "oidc-issuer", "", "sign users in through this OpenID Connect provider (its issuer URL, https)")
	f.StringVar(&c.ClientID, "oidc-client-id", "", "control's client ID at the OpenID Connect provider")
	f.StringVar(&c.ClientSecretFile, "oidc-client-secret-file", "", "file holding control's client secret at the provider (mode 0600); none: a public client")
	f.StringVar(&c.GroupsClaim, "oidc-groups-claim", "groups", "the ID token claim listing the user's groups (a.b for a nested claim)")
	f.StringSliceVar(&c.Scopes, "oidc-scopes", DefaultScopes, "the scopes control asks the provider for")
}

// Enabled reports whether a provider is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// Check refuses a configuration control cannot sign anyone in with.
func (c Config) Check() error {
	u, err := url.Parse(c.Issuer)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--oidc-issuer %q: the provider's issuer is an https URL without query, like https://accounts.google.com", c.Issuer)
	}
	if c.ClientID == "" {
		return fmt.Errorf("--oidc-issuer %s needs --oidc-client-id: the client ID control is registered under at the provider", c.Issuer)
	}
	if c.groupsPath() == nil {
		return fmt.Errorf("--oidc-groups-claim %q: name a claim, or a path like realm_access.roles", c.GroupsClaim)
	}
	for _, s := range c.scopes() {
		if s == "openid" {
			return nil
		}
	}
	return fmt.Errorf("--oidc-scopes %s: OpenID Connect needs the openid scope", strings.Join(c.Scopes, ","))
}

func (c Config) scopes() []string {
	if len(c.Scopes) == 0 {
		return DefaultScopes
	}
	return c.Scopes
}

func (c Config) groupsPath() []string {
	claim := c.GroupsClaim
	if claim == "" {
		claim = "groups"
	}
	path := strings.Split(claim, ".")
	for _, p := range path {
		if p == "" {
			return nil
		}
	}
	return path
}
