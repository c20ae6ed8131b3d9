package cli

import (
	"context"
	"fmt"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/cli/config"
)

// signIn runs the browser sign-in (or, with noBrowser or no browser to
// open, the device-code grant) against control and returns the session
// with who it belongs to. The URL (and code) go to stderr above a spinner.
func (a *app) signIn(ctx context.Context, e *config.Effective, clientID string, noBrowser bool) (*auth.Token, *api.Me, error) {
	c, err := a.controlClient(e, "")
	if err != nil {
		return nil, nil, err
	}
	// Printed before the flow's URL and code on a plain output, drawn
	// under them on a terminal: it must read well in both places.
	msg := "Waiting for the sign-in to finish…"
	p := a.startProgress("")
	flow := &auth.Flow{Issuer: e.APIURL, ClientID: clientID, HTTPClient: c.HTTP, Opener: a.env.Opener, Out: p, AllowHTTP: a.insecureHTTP}
	if noBrowser {
		flow.Opener = nil
	}
	p.Set(msg)
	tok, err := a.env.signIn(ctx, flow, noBrowser)
	p.Stop("")
	if err != nil {
		return nil, nil, fmt.Errorf("sign in to %s: %w", e.APIURL, err)
	}
	me, err := c.WithToken(tok.AccessToken).Me(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("sign in to %s: control does not accept the new session: %w", e.APIURL, err)
	}
	if tok.ExpiresAt.IsZero() {
		tok.ExpiresAt = me.ExpiresAt
	}
	return tok, me, nil
}

// defaultSignIn is the real sign-in: auth.Flow decides between the
// browser and the device grant.
func defaultSignIn(ctx context.Context, f *auth.Flow, noBrowser bool) (*auth.Token, error) {
	return f.SignIn(ctx, noBrowser)
}
