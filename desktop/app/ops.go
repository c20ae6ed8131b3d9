package app

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/runos/vpn/desktop/menu"
	"github.com/runos/vpn/vpnd/localapi"
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

// up is `runos vpn up [--cid CID]`: sign in in the browser when the
// session is not valid, hand the session to the daemon, then connect CID,
// else the configured cid, else the account's only cluster. It returns
// once the daemon accepted the join; the handshake shows up in the stream.
func (a *App) up(ctx context.Context, cid string, st *localapi.Status) (*localapi.Status, error) {
	if st == nil {
		var err error
		if st, err = a.call(ctx, "status", a.cfg.Daemon.Status); err != nil {
			return nil, err
		}
	}
	if st.Session.State != localapi.SessionSignedIn {
		var err error
		if st, err = a.signIn(ctx, st); err != nil {
			return nil, err
		}
	}
	cid, err := a.pickCluster(cid, st)
	if err != nil {
		return st, err
	}
	return a.call(ctx, "connect "+cid, func(ctx context.Context) (*localapi.Status, error) {
		return a.cfg.Daemon.Connect(ctx, cid)
	})
}

// signIn runs the browser sign-in as this user and hands the session to
// the daemon. Only a click gets here: the app never signs in on its own.
func (a *App) signIn(ctx context.Context, st *localapi.Status) (*localapi.Status, error) {
	apiURL := a.cfg.APIURL
	if apiURL == "" {
		apiURL = st.Session.APIURL
	}
	if apiURL == "" {
		return nil, errors.New("sign in: no control URL; set it with: runos config set api-url https://…")
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
			return nil, fmt.Errorf("sign in to %s: no answer from the browser within %s; try again", apiURL, a.cfg.SignInTimeout)
		case sctx.Err() != nil: // the user cancelled, or signed in with the CLI meanwhile
			return nil, fmt.Errorf("sign in to %s: %w", apiURL, context.Canceled)
		}
		return nil, fmt.Errorf("sign in to %s: %w", apiURL, err)
	}
	return a.call(ctx, "hand the session to the daemon", func(ctx context.Context) (*localapi.Status, error) {
		return a.cfg.Daemon.SetSession(ctx, localapi.SessionRequest{APIURL: apiURL, AccessToken: tok.AccessToken, ExpiresAt: tok.ExpiresAt})
	})
}

// pickCluster chooses what up connects, as the CLI does.
func (a *App) pickCluster(cid string, st *localapi.Status) (string, error) {
	switch {
	case cid != "":
		return cid, nil
	case a.cfg.DefaultCID != "":
		return a.cfg.DefaultCID, nil
	case len(st.Clusters) == 1:
		return st.Clusters[0].CID, nil
	case len(st.Clusters) == 0:
		return "", errors.New("connect: your account has no cluster you can reach")
	}
	cids := make([]string, len(st.Clusters))
	for i, c := range st.Clusters {
		cids[i] = c.CID
	}
	return "", fmt.Errorf("connect: choose a cluster (%s): click its row, or set a default with: runos config set cid <cid>", strings.Join(cids, ", "))
}
