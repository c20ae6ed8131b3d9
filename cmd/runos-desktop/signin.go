package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/desktop/app"
	"github.com/runos/vpn/vpnd/localapi/vpnup"
)

// signIn is the browser sign-in as this user: the authorization-code grant
// with PKCE against control, the page opened by $BROWSER or
// github.com/pkg/browser. Progress goes to the log.
func signIn(caFile string, log *slog.Logger) app.SignIn {
	return func(ctx context.Context, apiURL string) (*app.Token, error) {
		c, err := api.NewClient(apiURL, "", caFile)
		if err != nil {
			return nil, err
		}
		f := &auth.Flow{
			Issuer:     apiURL,
			ClientID:   api.ClientDesktop,
			HTTPClient: c.HTTP,
			Opener:     auth.SystemOpener(os.Getenv),
			Out:        logWriter{log},
		}
		tok, err := f.SignInBrowser(ctx)
		if err != nil {
			return nil, err
		}
		return &app.Token{AccessToken: tok.AccessToken, ExpiresAt: tok.ExpiresAt}, nil
	}
}

// control is control's client with a fresh token, trusting caFile as the
// sign-in did: up lists the account's clusters with it.
func control(caFile string) app.Control {
	return func(apiURL, token string) (vpnup.Lister, error) {
		c, err := api.NewClient(apiURL, token, caFile)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

func openURL(u string) error { return auth.SystemOpener(os.Getenv).Open(u) }

// logWriter turns the flow's progress lines into log records.
type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info("sign-in", "msg", string(p))
	return len(p), nil
}
