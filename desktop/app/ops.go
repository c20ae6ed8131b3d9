package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/runos/vpn/desktop/menu"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/localapi/vpnup"
)

// do runs one operation against the daemon; st is the latest status the
// menu showed (nil if none).
func (a *App) do(ctx context.Context, op menu.Op, st *localapi.Status) (*localapi.Status, error) {
	switch op.Kind {
	case menu.OpUp:
		return a.up(ctx, op.CID, st)
	case menu.OpDown:
		return a.call(ctx, "disconnect", func(ctx context.Context) (*localapi.Status, error) {
			return a.cfg.Daemon.EndSession(ctx)
		})
	case menu.OpConnect:
		return a.call(ctx, "connect "+op.CID, func(ctx context.Context) (*localapi.Status, error) {
			return a.cfg.Daemon.Connect(ctx, op.CID)
		})
	case menu.OpDisconnect:
		return a.call(ctx, "disconnect "+op.CID, func(ctx context.Context) (*localapi.Status, error) {
			return a.cfg.Daemon.Disconnect(ctx, op.CID)
		})
	}
	return nil, fmt.Errorf("unknown operation %v", op)
}

// call is one daemon request with the operation's timeout and its name in
// the error.
func (a *App) call(ctx context.Context, what string, fn func(context.Context) (*localapi.Status, error)) (*localapi.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.OpTimeout)
	defer cancel()
	st, err := fn(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return st, nil
}

// up is `runos vpn up [--cid CID]`, deciding as the CLI does (vpnup):
// sign in in the browser when the daemon's session does not serve (signed
// out, lapsed, or signed in to another control than the configured one),
// hand the session to the daemon, then connect CID, else the configured
// cid; when the daemon restored the clusters the user had connected,
// nothing more; else the account's only cluster (as control lists it with
// the fresh token, the daemon having forgotten its list). It returns once
// the daemon accepted the join; the handshake shows up in the stream.
func (a *App) up(ctx context.Context, cid string, st *localapi.Status) (*localapi.Status, error) {
	if st == nil {
		var err error
		if st, err = a.call(ctx, "status", a.cfg.Daemon.Status); err != nil {
			return nil, err
		}
	}
	var fresh vpnup.Lister
	if reason := vpnup.SignInReason(st.Session, a.cfg.APIURL, a.cfg.Now()); reason != "" {
		a.cfg.Log.Info(reason)
		apiURL, tok, next, err := a.signIn(ctx, st)
		if err != nil {
			return nil, err
		}
		st = next
		if fresh, err = a.cfg.Control(apiURL, tok.AccessToken); err != nil {
			return st, fmt.Errorf("connect: control client: %w", err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, a.cfg.OpTimeout) // control's list, when asked
	plan, err := vpnup.Decide(dctx, cid, a.cfg.DefaultCID, st, fresh)
	cancel()
	if err != nil {
		if ce := (*vpnup.ChooseError)(nil); errors.As(err, &ce) && len(ce.Available) > 0 {
			err = fmt.Errorf("%w; click a cluster's row, or set a default with: runos config set cid <cid>", err)
		}
		return st, fmt.Errorf("connect: %w", err)
	}
	if plan.Connect == "" {
		// The daemon reconnects the restored clusters itself.
		a.cfg.Log.Info("the daemon reconnects the clusters you had connected", "clusters", plan.Restored)
		return st, nil
	}
	return a.call(ctx, "connect "+plan.Connect, func(ctx context.Context) (*localapi.Status, error) {
		return a.cfg.Daemon.Connect(ctx, plan.Connect)
	})
}

// signIn runs the browser sign-in as this user and hands the session to
// the daemon: the control it signed in to, the token and the daemon's
// answer. Only a click gets here: the app never signs in on its own.
func (a *App) signIn(ctx context.Context, st *localapi.Status) (string, *Token, *localapi.Status, error) {
	apiURL := a.cfg.APIURL
	if apiURL == "" {
		apiURL = strings.TrimRight(st.Session.APIURL, "/")
	}
	if apiURL == "" {
		return "", nil, nil, errors.New("sign in: no control URL; set it with: runos config set api-url https://…")
	}
	sctx, cancel := context.WithTimeout(ctx, a.cfg.SignInTimeout)
	defer cancel()
	a.mu.Lock()
	a.cancelIn = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.cancelIn = nil
		a.mu.Unlock()
	}()
	a.post(menu.SignInEvent{Active: true})
	a.cfg.Log.Info("signing in in the browser", "control", apiURL)
	tok, err := a.cfg.SignIn(sctx, apiURL)
	a.post(menu.SignInEvent{Active: false})
	if err != nil {
		switch {
		case errors.Is(sctx.Err(), context.DeadlineExceeded):
			return "", nil, nil, fmt.Errorf("sign in to %s: no answer from the browser within %s; try again", apiURL, a.cfg.SignInTimeout)
		case sctx.Err() != nil: // the user cancelled, or signed in with the CLI meanwhile
			return "", nil, nil, fmt.Errorf("sign in to %s: %w", apiURL, context.Canceled)
		}
		return "", nil, nil, fmt.Errorf("sign in to %s: %w", apiURL, err)
	}
	next, err := a.call(ctx, "hand the session to the daemon", func(ctx context.Context) (*localapi.Status, error) {
		return a.cfg.Daemon.SetSession(ctx, localapi.SessionRequest{APIURL: apiURL, AccessToken: tok.AccessToken, ExpiresAt: tok.ExpiresAt})
	})
	if err != nil {
		return "", nil, nil, err
	}
	return apiURL, tok, next, nil
}
