// Package auth is the client side of sign-in to runos-control: the
// authorization-code grant with PKCE through a loopback listener (RFC 8252),
// the device-authorization grant (RFC 8628) where no browser can open, the
// browser opener, and the keystore for secrets kept in the user's keychain.
//
// The CLI and RunOS Desktop run these as the user (the daemon never opens a
// browser) and hand the resulting token to the daemon.
package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
)

// Opener opens a URL in the user's browser.
type Opener interface{ Open(url string) error }

// ErrNoBrowser is wrapped by SignInBrowser's error when no browser could be
// opened (no Opener, the command is missing, or it failed): SignIn then
// falls back to the device grant.
var ErrNoBrowser = errors.New("no browser could be opened")

// Flow signs a user in to control.
type Flow struct {
	Issuer     string       // control's base URL
	ClientID   string       // api.ClientCLI or api.ClientDesktop
	HTTPClient *http.Client // trusts control's CA
	Opener     Opener       // nil: no browser available
	Out        io.Writer    // where the URL, the code and progress go
	// AllowHTTP lets Issuer be http:// (a process started with
	// --insecure-http); otherwise only https:// is signed in to.
	AllowHTTP bool
}

// Token is the result of a sign-in.
type Token struct {
	AccessToken string
	ExpiresAt   time.Time // zero if control did not say (expires_in absent)
}

// SignIn uses the browser unless noBrowser, Opener is nil, or opening
// fails; then the device grant.
func (f *Flow) SignIn(ctx context.Context, noBrowser bool) (*Token, error) {
	if a, ok := f.Opener.(interface{ available() error }); ok && !noBrowser && a.available() != nil {
		noBrowser = true // headless: the code at once, with no browser launcher failing first
	}
	if !noBrowser && f.Opener != nil {
		tok, err := f.SignInBrowser(ctx)
		if !errors.Is(err, ErrNoBrowser) {
			return tok, err
		}
		fmt.Fprintf(f.out(), "Could not open a browser (%v); signing in with a code instead.\n", errors.Unwrap(err))
	}
	return f.SignInDevice(ctx)
}

func (f *Flow) out() io.Writer {
	if f.Out == nil {
		return io.Discard
	}
	return f.Out
}

// config is the OAuth 2.0 client for control's endpoints (public client:
// no secret, client_id in the body).
func (f *Flow) config() (*oauth2.Config, error) {
	base, err := api.ParseControlURL(f.Issuer, f.AllowHTTP)
	if err != nil {
		return nil, err
	}
	if f.ClientID == "" {
		return nil, errors.New("sign-in needs a client id (runos-cli or runos-desktop)")
	}
	return &oauth2.Config{
		ClientID: f.ClientID,
		Endpoint: oauth2.Endpoint{
			AuthURL:       base + api.PathAuthorize,
			TokenURL:      base + api.PathToken,
			DeviceAuthURL: base + api.PathDeviceCode,
			AuthStyle:     oauth2.AuthStyleInParams,
		},
	}, nil
}

// clientCtx makes golang.org/x/oauth2 use the flow's HTTP client (which
// trusts control's CA).
func (f *Flow) clientCtx(ctx context.Context) context.Context {
	if f.HTTPClient == nil {
		return ctx
	}
	return context.WithValue(ctx, oauth2.HTTPClient, f.HTTPClient)
}

// token converts and checks what the token endpoint returned.
func token(t *oauth2.Token) (*Token, error) {
	if typ := t.Type(); !strings.EqualFold(typ, "Bearer") {
		return nil, fmt.Errorf("control returned a %q token, want Bearer", typ)
	}
	return &Token{AccessToken: t.AccessToken, ExpiresAt: t.Expiry}, nil
}

// describe turns an OAuth error response into words with its code kept.
func describe(err error) string {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return err.Error()
	}
	if re.ErrorCode == "" {
		return fmt.Sprintf("control answered %s", re.Response.Status)
	}
	if re.ErrorDescription != "" {
		return re.ErrorCode + ": " + re.ErrorDescription
	}
	return re.ErrorCode
}
