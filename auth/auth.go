// Package auth is the client side of sign-in to runos-control: the
// authorization-code grant with PKCE through a loopback listener (RFC 8252),
// the device-authorization grant (RFC 8628) where no browser can open, the
// browser opener, and the keystore for secrets kept in the user's keychain.
package auth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// Opener opens a URL in the user's browser.
type Opener interface{ Open(url string) error }

// Flow signs a user in to control.
type Flow struct {
	Issuer     string       // control's base URL
	ClientID   string       // api.ClientCLI or api.ClientDesktop
	HTTPClient *http.Client // trusts control's CA
	Opener     Opener       // nil: no browser available
	Out        io.Writer    // where the URL, the code and progress go
}

// Token is the result of a sign-in.
type Token struct {
	AccessToken string
	ExpiresAt   time.Time
}

// SignInBrowser runs the authorization-code grant with PKCE.
func (f *Flow) SignInBrowser(ctx context.Context) (*Token, error) {
	return nil, errors.New("auth: SignInBrowser is not implemented yet")
}

// SignInDevice runs the device-authorization grant.
func (f *Flow) SignInDevice(ctx context.Context) (*Token, error) {
	return nil, errors.New("auth: SignInDevice is not implemented yet")
}

// SignIn uses the browser unless noBrowser, Opener is nil, or opening
// fails; then the device grant.
func (f *Flow) SignIn(ctx context.Context, noBrowser bool) (*Token, error) {
	return nil, errors.New("auth: SignIn is not implemented yet")
}
