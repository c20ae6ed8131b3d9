package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/localapi/vpnup"
)

// defaultConnectTimeout bounds the wait for a handshake (--timeout).
const defaultConnectTimeout = 30 * time.Second

func (a *app) vpnCmd() *cobra.Command {
	c := a.group("vpn", "Reach your clusters over the user VPN",
		`The user VPN connects this machine to your clusters' private services.
A background service (runos vpnd, installed once with `+platform.AdminCommand("vpn install")+`)
holds the tunnel wg1 and this machine's device key; these commands steer it.

A sign-in lasts 24 hours. When it lapses, runos vpn up signs you in again and
reconnects the clusters you had connected.`,
		a.vpnUpCmd(),
		a.vpnConnectCmd(),
		a.vpnDisconnectCmd(),
		a.vpnStatusCmd(),
		a.vpnDownCmd(),
		a.vpnDevicesCmd(),
		a.vpnInstallCmd(),
		a.vpnUninstallCmd(),
		a.vpnDoctorCmd(),
		a.vpnBugreportCmd(),
	)
	a.addSocketFlag(c)
	return c
}

type upFlags struct {
	cid       string
	noBrowser bool
	timeout   time.Duration
	json      bool
}

func (a *app) vpnUpCmd() *cobra.Command {
	var f upFlags
	c := &cobra.Command{
		Use:   "up",
		Short: "Sign in if needed and connect your default cluster",
		Long: `Sign in if needed, then connect your default cluster and wait for the
live WireGuard handshake with its VPN server.

Signing in opens control's login page in your browser ($BROWSER when set);
the URL is printed too. With --no-browser, or where no browser can open
(no display, or an SSH session), it prints a URL and a code to enter on
any device, and tries no browser first.

The default cluster is --cid, else the configured cid (runos config set cid
<cid>), else your account's only cluster. With several and no default, on
a terminal it asks which one (and offers to remember it); elsewhere it
stops, naming them. After a fresh sign-in the daemon
reconnects the clusters you had connected before; up waits for those too.

It returns once every cluster is up (peerUp), or fails after --timeout with
the reason, disconnecting again what it connected.`,
		Example: `  runos vpn up
  runos vpn up --cid xym
  runos vpn up --no-browser      # over SSH: sign in with a code on another device`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error { return a.vpnUp(cmd.Context(), f) }),
	}
	c.Flags().StringVar(&f.cid, "cid", "", "cluster to connect (default: the configured cid, else your only cluster)")
	c.Flags().BoolVar(&f.noBrowser, "no-browser", false, "sign in with a code instead of opening a browser")
	c.Flags().DurationVar(&f.timeout, "timeout", defaultConnectTimeout, "how long to wait for the handshake")
	c.Flags().BoolVar(&f.json, "json", false, "print the daemon's status as JSON when done")
	return c
}

func checkTimeout(d time.Duration) error {
	if d <= 0 {
		return usagef("--timeout must be positive, got %s", d)
	}
	return nil
}

func (a *app) vpnUp(ctx context.Context, f upFlags) error {
	if f.cid != "" {
		if err := cidArg(f.cid); err != nil {
			return err
		}
	}
	if err := checkTimeout(f.timeout); err != nil {
		return err
	}
	start := a.env.Now()
	e, err := a.effective()
	if err != nil {
		return err
	}
	d, st, err := a.steer(ctx)
	if err != nil {
		return fmt.Errorf("vpn up: %w", err)
	}
	configured := e.APIURL
	if e.APIURL == "" {
		e.APIURL = strings.TrimRight(st.Session.APIURL, "/")
	}
	var token string
	if reason := vpnup.SignInReason(st.Session, configured, start); reason != "" {
		if err := needAPIURL(e); err != nil {
			return fmt.Errorf("vpn up: %w", err)
		}
		fmt.Fprintln(a.env.Stderr, capitalize(reason)+".")
		tok, me, err := a.signIn(ctx, e, api.ClientCLI, f.noBrowser)
		if err != nil {
			return fmt.Errorf("vpn up: %w", err)
		}
		st, err = d.SetSession(ctx, localapi.SessionRequest{
			APIURL: e.APIURL, AccessToken: tok.AccessToken, ExpiresAt: tok.ExpiresAt, User: me.User,
		})
		if err != nil {
			return stoppedWhile("taking over the session", fmt.Errorf("vpn up: hand the session to the daemon: %w", err))
		}
		fmt.Fprintf(a.env.Stderr, "Signed in as %s until %s.\n", me.User, fmtTime(tok.ExpiresAt, start))
		token = tok.AccessToken
	}

	// The time to report is the connect's, not the user's at the login page.
	start = a.env.Now()
	var fresh vpnup.Lister
	if token != "" {
		c, err := a.controlClient(e, token)
		if err != nil {
			return fmt.Errorf("vpn up: %w", err)
		}
		fresh = c
	}
	plan, err := vpnup.Decide(ctx, f.cid, e.CID, st, fresh)
	if ce := (*vpnup.ChooseError)(nil); errors.As(err, &ce) && len(ce.Available) > 1 {
		// Several clusters and no default: on a terminal, ask.
		cid, asked, perr := a.pickCluster(ce.Available)
		if perr != nil {
			return fmt.Errorf("vpn up: %w", perr)
		}
		if asked {
			plan, err = vpnup.Decide(ctx, cid, e.CID, st, fresh)
		}
	}
	if err != nil {
		return fmt.Errorf("vpn up: %w", chooseHint(err))
	}
	restored := plan.Restored
	targets := restored
	var added []string
	if cid := plan.Connect; cid != "" {
		if _, err := d.ConnectWith(ctx, localapi.ConnectRequest{CID: cid, Default: e.CID}); err != nil {
			return stoppedWhile("connecting "+cid, fmt.Errorf("vpn up: connect %s: %w", cid, signedOutHint(err)))
		}
		targets, added = append(slices.Clone(restored), cid), []string{cid}
	}
	if len(restored) > 0 {
		fmt.Fprintf(a.env.Stderr, "Reconnecting %s.\n", strings.Join(restored, ", "))
	}
	st, err = a.waitConnected(ctx, d, targets, added, f.timeout)
	if err != nil {
		return fmt.Errorf("vpn up: %w", err)
	}
	return a.reportConnected(st, targets, start, f.json)
}

// steer is where every command that changes the daemon's state starts: the
// daemon's status, and its refusal when this user may only read, before
// anything else is asked or done (no sign-in the daemon would not take, no
// "sign in first" to a user who could not connect anyway).
func (a *app) steer(ctx context.Context) (*localapi.Client, *localapi.Status, error) {
	d := a.daemon()
	st, err := d.Status(ctx)
	if err != nil {
		return nil, nil, err
	}
	a.warnDaemonVersion(st.Version)
	if err := readOnlyErr(st); err != nil {
		return nil, nil, err
	}
	return d, st, nil
}

// signedOutHint turns the daemon's signed_out refusal into what to run.
func signedOutHint(err error) error {
	if api.IsCode(err, localapi.CodeSignedOut) {
		return errors.New("not signed in: run `runos vpn up` first")
	}
	return err
}

// waitConnected follows the daemon's status stream until every target has
// peerUp, the session ends, or timeout passes. On failure it disconnects
// the clusters in rollback (those this command connected), so the daemon
// is left as it was.
func (a *app) waitConnected(ctx context.Context, d *localapi.Client, targets, rollback []string, timeout time.Duration) (*localapi.Status, error) {
	if len(targets) == 0 {
		return d.Status(ctx)
	}
	p := a.startProgress("Connecting " + strings.Join(targets, ", ") + "…")
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := &localapi.Status{}
	var cs connectState
	reason := ""
	werr := d.Watch(wctx, func(st *localapi.Status) bool {
		last = st
		cs = checkConnected(st, targets)
		if cs.reason != "" {
			reason = cs.reason
		}
		if cs.done || cs.fatal != nil {
			return false
		}
		p.Set(cs.waiting)
		return true
	})
	p.Stop("")
	var err error
	switch {
	case cs.done:
		return last, nil
	case cs.fatal != nil:
		err = cs.fatal
	case ctx.Err() != nil:
		err = errors.New("interrupted while waiting for the handshake")
	case wctx.Err() != nil:
		err = timeoutError(last, targets, timeout, reason)
	default:
		err = fmt.Errorf("lost the daemon's status stream: %w", werr)
	}
	a.undoConnect(ctx, d, rollback)
	return last, err
}

// undoConnect disconnects clusters after a failed connect, with a context of
// its own: the command's may be the one that ended.
func (a *app) undoConnect(ctx context.Context, d *localapi.Client, cids []string) {
	for _, cid := range cids {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, err := d.Disconnect(uctx, cid)
		cancel()
		if err != nil {
			fmt.Fprintf(a.env.Stderr, "warning: could not disconnect %s again: %v; run `runos vpn disconnect %s`\n", cid, err, cid)
			continue
		}
		fmt.Fprintf(a.env.Stderr, "Disconnected %s again, so nothing is left half-connected.\n", cid)
	}
}

// reportConnected prints the outcome of up or connect.
func (a *app) reportConnected(st *localapi.Status, targets []string, start time.Time, asJSON bool) error {
	if asJSON {
		return printJSON(a.env.Stdout, st)
	}
	took := a.env.Now().Sub(start)
	if len(targets) == 0 {
		fmt.Fprintln(a.env.Stdout, "Signed in; no cluster connected. Connect one with `runos vpn connect <cid>`.")
		return nil
	}
	for _, cid := range targets {
		c := findCluster(st, cid)
		if c == nil {
			continue
		}
		fmt.Fprintf(a.env.Stdout, "%s is up: VPN server %s at %s (%s), handshake %s\n",
			cid, c.Server.NodeID, c.Server.Endpoint, c.Server.Address, fmtAgo(c.LastHandshake, a.env.Now()))
	}
	fmt.Fprintf(a.env.Stdout, "Connected in %s.\n", fmtMillis(took))
	return nil
}

type connectFlags struct {
	timeout time.Duration
	json    bool
}

func (a *app) vpnConnectCmd() *cobra.Command {
	var f connectFlags
	c := &cobra.Command{
		Use:   "connect CID",
		Short: "Reach another cluster too",
		Long: `Connect one more cluster, keeping the others, and wait for the live
handshake with its VPN server. Only the connected clusters' names resolve
over the tunnel.

It needs a valid sign-in: when signed out or lapsed, run runos vpn up.
On failure (or after --timeout) the cluster is disconnected again.`,
		Example: `  runos vpn connect xym
  runos vpn connect xym --json`,
		Args: exactArgs("CID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error { return a.vpnConnect(cmd.Context(), args[0], f) }),
	}
	c.Flags().DurationVar(&f.timeout, "timeout", defaultConnectTimeout, "how long to wait for the handshake")
	c.Flags().BoolVar(&f.json, "json", false, "print the daemon's status as JSON when done")
	return c
}

func (a *app) vpnConnect(ctx context.Context, cid string, f connectFlags) error {
	if err := cidArg(cid); err != nil {
		return err
	}
	if err := checkTimeout(f.timeout); err != nil {
		return err
	}
	start := a.env.Now()
	d, st, err := a.steer(ctx)
	if err != nil {
		return fmt.Errorf("connect %s: %w", cid, err)
	}
	if err := needSession(st.Session, start); err != nil {
		return fmt.Errorf("connect %s: %w", cid, err)
	}
	var rollback []string
	if c := findCluster(st, cid); c == nil || !c.Wanted {
		def := ""
		if e, err := a.effective(); err == nil {
			def = e.CID
		}
		if _, err := d.ConnectWith(ctx, localapi.ConnectRequest{CID: cid, Default: def}); err != nil {
			return stoppedWhile("connecting "+cid, fmt.Errorf("connect %s: %w", cid, signedOutHint(err)))
		}
		rollback = []string{cid}
	}
	st, err = a.waitConnected(ctx, d, []string{cid}, rollback, f.timeout)
	if err != nil {
		return fmt.Errorf("connect %s: %w", cid, err)
	}
	return a.reportConnected(st, []string{cid}, start, f.json)
}

// needSession refuses to act without a valid sign-in, saying what to run.
func needSession(s localapi.Session, now time.Time) error {
	switch {
	case s.State == localapi.SessionRevoked:
		return fmt.Errorf("this device was removed from RunOS at %s: run `runos vpn up` to sign in again with a fresh key", fmtTime(s.RevokedAt, now))
	case s.State == localapi.SessionExpired || s.State == localapi.SessionSignedIn && !s.ExpiresAt.IsZero() && !now.Before(s.ExpiresAt):
		return fmt.Errorf("your sign-in expired at %s: run `runos vpn up` to sign in again", fmtTime(s.ExpiresAt, now))
	case s.State != localapi.SessionSignedIn:
		return errors.New("not signed in: run `runos vpn up` first")
	}
	return nil
}

func (a *app) vpnDisconnectCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "disconnect CID",
		Short: "Stop reaching a cluster",
		Long: `Disconnect one cluster: its peer, route and DNS names leave this machine;
the other clusters and the session stay.`,
		Example: `  runos vpn disconnect xym`,
		Args:    exactArgs("CID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			cid := args[0]
			if err := cidArg(cid); err != nil {
				return err
			}
			d, _, err := a.steer(cmd.Context())
			if err != nil {
				return fmt.Errorf("disconnect %s: %w", cid, err)
			}
			st, err := d.Disconnect(cmd.Context(), cid)
			if err != nil {
				return stoppedWhile("disconnecting "+cid, fmt.Errorf("disconnect %s: %w", cid, err))
			}
			if asJSON {
				return printJSON(a.env.Stdout, st)
			}
			if c := findCluster(st, cid); c != nil && c.Error != "" && hasWarning(st, localapi.WarnLeavePending) {
				fmt.Fprintf(a.env.Stdout, "Disconnected %s here; %s.\n", cid, c.Error)
				return nil
			}
			fmt.Fprintf(a.env.Stdout, "Disconnected %s.\n", cid)
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the daemon's status as JSON")
	return c
}

func (a *app) vpnDownCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "down",
		Short: "Disconnect every cluster and end the session",
		Long: `Disconnect every cluster and end the session, on control too: the
clusters' VPN servers drop this device's peer at once. The next runos vpn up
signs in again.`,
		Example: `  runos vpn down`,
		Args:    exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			d, _, err := a.steer(cmd.Context())
			if err != nil {
				return fmt.Errorf("vpn down: %w", err)
			}
			st, err := d.EndSession(cmd.Context())
			if err != nil {
				return stoppedWhile("disconnecting every cluster and ending the session", fmt.Errorf("vpn down: %w", err))
			}
			if asJSON {
				return printJSON(a.env.Stdout, st)
			}
			for _, w := range st.Warnings {
				if w.Code == localapi.WarnSignOutPending {
					fmt.Fprintf(a.env.Stdout, "Disconnected every cluster and signed out here; %s.\n", w.Message)
					return nil
				}
			}
			fmt.Fprintln(a.env.Stdout, "Disconnected every cluster and ended the session.")
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the daemon's status as JSON")
	return c
}

// stoppedWhile words a daemon that went away in the middle of a change
// (doing: "disconnecting ky3"): it may have taken effect before it did, and
// its status after the restart says. Any other error is returned as is.
func stoppedWhile(doing string, err error) error {
	var se *localapi.StoppedError
	if errors.As(err, &se) {
		return fmt.Errorf("the RunOS VPN daemon stopped while %s; it may have taken effect: check `runos vpn status`", doing)
	}
	return err
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
