package cli

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/cli/config"
)

// EnvToken is the operator token for the operator verbs, before the stored one.
const EnvToken = "RUNOS_TOKEN"

// operatorAccount is the keystore entry of `runos login`.
const operatorAccount = "operator"

// credential is what `runos login` keeps in the keystore.
type credential struct {
	APIURL    string    `json:"apiUrl"`
	Token     string    `json:"token"`
	User      string    `json:"user"`
	Operator  bool      `json:"operator"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

func (a *app) keystore() (Keystore, error) {
	p, err := a.credentialsPath()
	if err != nil {
		return nil, err
	}
	return a.env.Keystore(p), nil
}

// storedCredential returns the saved operator sign-in, or nil when none.
func (a *app) storedCredential() (*credential, error) {
	ks, err := a.keystore()
	if err != nil {
		return nil, err
	}
	s, err := ks.Get(operatorAccount)
	if errors.Is(err, auth.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the stored operator sign-in: %w", err)
	}
	var c credential
	if err := json.Unmarshal([]byte(s), &c); err != nil || c.Token == "" {
		return nil, errors.New("the stored operator sign-in is unreadable: run `runos login` again")
	}
	return &c, nil
}

// tokenSource names where an operator token came from, for error messages.
type tokenSource string

const (
	fromEnv   tokenSource = "RUNOS_TOKEN"
	fromLogin tokenSource = "runos login"
)

// operator is a control client for the operator verbs, with the token from
// RUNOS_TOKEN, else from runos login; it says what to do when neither
// serves.
func (a *app) operator() (*api.Client, tokenSource, error) {
	e, err := a.effective()
	if err != nil {
		return nil, "", err
	}
	if t := a.env.Getenv(EnvToken); t != "" {
		c, err := a.controlClient(e, t)
		return c, fromEnv, err
	}
	cred, err := a.storedCredential()
	if err != nil {
		return nil, "", err
	}
	if cred == nil {
		return nil, "", errors.New("not logged in: run `runos login` (or set RUNOS_TOKEN to an operator token)")
	}
	if e.APIURL == "" {
		e.APIURL = cred.APIURL
	}
	if cred.APIURL != e.APIURL {
		return nil, "", fmt.Errorf("logged in to %s, not %s: run `runos login`", cred.APIURL, e.APIURL)
	}
	now := a.env.Now()
	if !cred.ExpiresAt.IsZero() && !now.Before(cred.ExpiresAt) {
		return nil, "", fmt.Errorf("your operator sign-in expired at %s: run `runos login`", fmtTime(cred.ExpiresAt, now))
	}
	c, err := a.controlClient(e, cred.Token)
	return c, fromLogin, err
}

// controlErr gives a failed operator call its context, and turns a
// rejected token into what to do about it. Refusals keep control's
// message and hint.
func controlErr(what string, src tokenSource, err error) error {
	switch {
	case api.IsCode(err, api.CodeSessionExpired):
		return fmt.Errorf("%s: your operator sign-in expired: run `runos login`", what)
	case api.IsCode(err, api.CodeUnauthorized) && src == fromEnv:
		return fmt.Errorf("%s: control does not accept the token in RUNOS_TOKEN: %w", what, err)
	case api.IsCode(err, api.CodeUnauthorized):
		return fmt.Errorf("%s: control does not accept your sign-in: run `runos login` (%w)", what, err)
	}
	if terr := transportErr(what, "", err); terr != nil {
		return terr
	}
	return fmt.Errorf("%s: %w", what, err)
}

// transportErr words a request that got no answer from control, never the
// raw transport error: either it never reached control (nothing changed),
// or control went away while handling it, when a change may have taken
// effect (check is the command that shows whether; "" for a request that
// changes nothing). Nil for an answer of control's (an *api.Error).
func transportErr(what, check string, err error) error {
	var ae *api.Error
	var ue *url.Error
	if errors.As(err, &ae) || !errors.As(err, &ue) {
		return nil
	}
	host := ue.URL
	if u, perr := url.Parse(ue.URL); perr == nil {
		host = u.Scheme + "://" + u.Host
	}
	var oe *net.OpError
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	switch {
	case errors.As(err, &oe) && oe.Op == "dial", errors.As(err, &dnsErr):
		return fmt.Errorf("%s: control %s unreachable (%v); nothing was changed: check the network, or the api URL with `runos config get api-url`", what, host, ue.Err)
	case errors.As(err, &certErr):
		return fmt.Errorf("%s: control %s: %v; nothing was changed: check the CA file (`runos config get ca-file`) and the api URL", what, host, ue.Err)
	case check == "":
		return fmt.Errorf("%s: control %s stopped answering (%v): try again", what, host, ue.Err)
	}
	return fmt.Errorf("%s: control %s stopped answering before saying whether it was done (%v); it may have taken effect: check with `%s` before trying again",
		what, host, ue.Err, check)
}

// opCall runs one operator request with its context for errors.
func opCall[T any](ctx context.Context, a *app, what string, fn func(context.Context, *api.Client) (T, error)) (T, error) {
	return opChange(ctx, a, what, "", fn)
}

// opChange is opCall for a request that changes something: check is the
// command that shows whether it took effect, should control go away before
// answering.
func opChange[T any](ctx context.Context, a *app, what, check string, fn func(context.Context, *api.Client) (T, error)) (T, error) {
	var zero T
	c, src, err := a.operator()
	if err != nil {
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	v, err := fn(ctx, c)
	if err != nil {
		if terr := transportErr(what, check, err); terr != nil {
			return zero, terr
		}
		return zero, controlErr(what, src, err)
	}
	return v, nil
}

func (a *app) loginCmd() *cobra.Command {
	var noBrowser, asJSON bool
	c := &cobra.Command{
		Use:   "login",
		Short: "Sign in as an operator for clusters, nodes and services",
		Long: `Sign in to control in your browser as an operator, for the operator verbs
(clusters, nodes, services wireguard). The token is kept in your keychain,
or in a 0600 file next to your config where no keychain runs, and lasts
as long as a sign-in (24 hours).

RUNOS_TOKEN, when set, is used instead (for scripts and CI: an account's
operator API token). This sign-in is separate from runos vpn up.`,
		Example: `  runos login
  runos login --no-browser       # over SSH: sign in with a code on another device`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			return a.login(cmd.Context(), noBrowser, asJSON)
		}),
	}
	c.Flags().BoolVar(&noBrowser, "no-browser", false, "sign in with a code instead of opening a browser")
	c.Flags().BoolVar(&asJSON, "json", false, "print {apiUrl, user, operator, expiresAt} as JSON")
	return c
}

func (a *app) login(ctx context.Context, noBrowser, asJSON bool) error {
	e, err := a.effective()
	if err != nil {
		return err
	}
	if err := needAPIURL(e); err != nil {
		return fmt.Errorf("login: %w", err)
	}
	ks, err := a.keystore()
	if err != nil {
		return err
	}
	tok, me, err := a.signIn(ctx, e, api.ClientCLI, noBrowser)
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	cred := credential{APIURL: e.APIURL, Token: tok.AccessToken, User: me.User, Operator: me.Operator, ExpiresAt: tok.ExpiresAt}
	b, _ := json.Marshal(cred)
	if err := ks.Set(operatorAccount, string(b)); err != nil {
		return fmt.Errorf("login: keep the token: %w", err)
	}
	if !me.Operator {
		fmt.Fprintf(a.env.Stderr, "warning: %s is not an operator of any account: control will refuse the operator verbs, except those an operate rule of an account's policy grants\n", me.User)
	}
	if asJSON {
		cred.Token = ""
		return printJSON(a.env.Stdout, struct {
			APIURL    string    `json:"apiUrl"`
			User      string    `json:"user"`
			Operator  bool      `json:"operator"`
			ExpiresAt time.Time `json:"expiresAt,omitzero"`
		}{cred.APIURL, cred.User, cred.Operator, cred.ExpiresAt})
	}
	fmt.Fprintf(a.env.Stdout, "Logged in to %s as %s until %s.\n", e.APIURL, me.User, fmtTime(tok.ExpiresAt, a.env.Now()))
	return nil
}

func (a *app) logoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "End the operator sign-in of runos login",
		Long: `End the operator sign-in: the session ends on control and the token is
removed from your keychain (or its fallback file). RUNOS_TOKEN is not
touched.`,
		Example: `  runos logout`,
		Args:    exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			ks, err := a.keystore()
			if err != nil {
				return err
			}
			cred, err := a.storedCredential()
			if err != nil {
				// Unreadable: remove it anyway, that is what logout is for.
				return ks.Delete(operatorAccount)
			}
			if cred == nil {
				fmt.Fprintln(a.env.Stdout, "Not logged in.")
				return nil
			}
			e := &config.Effective{APIURL: cred.APIURL, Source: map[string]string{}}
			if eff, err := a.effective(); err == nil {
				e.CAFile = eff.CAFile
			}
			if c, err := a.controlClient(e, cred.Token); err == nil {
				if err := c.EndSession(cmd.Context()); err != nil && !api.IsCode(err, api.CodeUnauthorized) && !api.IsCode(err, api.CodeSessionExpired) {
					fmt.Fprintf(a.env.Stderr, "warning: could not end the session on %s: %v (removing the local token anyway)\n", cred.APIURL, err)
				}
			}
			if err := ks.Delete(operatorAccount); err != nil {
				return fmt.Errorf("logout: %w", err)
			}
			fmt.Fprintf(a.env.Stdout, "Logged out of %s.\n", cred.APIURL)
			return nil
		}),
	}
}
