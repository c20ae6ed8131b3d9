package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
)

// Operator API tokens: for scripts and CI (RUNOS_TOKEN), with a name and
// an expiry; the secret is shown once.

func (a *app) tokensCmd() *cobra.Command {
	return a.group("tokens", "Create, list and revoke operator API tokens",
		`Operator API tokens let scripts and CI use the operator verbs (set
RUNOS_TOKEN). Each has a name and an expiry (90 days unless --expires says
otherwise, at most 366 days); its secret is shown once, when it is created,
and kept only as a hash. The world file's token is listed as world-file.
A revoked or expired token is refused with a 401 that says so.

Creating a token needs a person's sign-in with the operator role (runos
login as an operator): a token cannot make tokens, and neither can an
"operate … -> *: manage-tokens" rule of the policy, since a token carries
every operator verb and outlives the rule. Listing and revoking work with
either, and for a user such a rule lets (after runos login).`,
		a.tokensCreateCmd(), a.tokensListCmd(), a.tokensRevokeCmd())
}

// parseExpires reads --expires: Go durations (12h, 90m) and whole days or
// weeks (90d, 2w).
func parseExpires(s string) (time.Duration, error) {
	bad := usagef("--expires %q: want a duration such as 90d, 2w or 12h", s)
	if n := len(s); n > 1 && (s[n-1] == 'd' || s[n-1] == 'w') {
		v, err := strconv.Atoi(s[:n-1])
		if err != nil || v <= 0 {
			return 0, bad
		}
		unit := 24 * time.Hour
		if s[n-1] == 'w' {
			unit *= 7
		}
		return time.Duration(v) * unit, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, bad
	}
	return d, nil
}

func (a *app) tokensCreateCmd() *cobra.Command {
	var name, expires, aid string
	var asJSON bool
	c := &cobra.Command{
		Use:   "create --name NAME [--expires 90d]",
		Short: "Create an operator token; its secret is shown once",
		Example: `  runos tokens create --name ci
  runos tokens create --name backup-script --expires 30d --json | jq -r .token`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			d, err := parseExpires(expires)
			if err != nil {
				return err
			}
			if d > api.MaxTokenTTL {
				return usagef("--expires %s: at most %d days", expires, int(api.MaxTokenTTL/(24*time.Hour)))
			}
			t, err := opCall(cmd.Context(), a, "create token "+name, func(ctx context.Context, c *api.Client) (*api.CreatedToken, error) {
				return c.CreateToken(ctx, api.CreateTokenRequest{Name: name, AID: aid, ExpiresInSeconds: int64(d / time.Second)})
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, t)
			}
			w := a.env.Stdout
			fmt.Fprintf(w, "Created token %s (%s) for account %s, expires %s.\n", t.Name, t.ID, t.AID, fmtTime(t.ExpiresAt, a.env.Now()))
			fmt.Fprintln(w, "Its secret, shown only now (keep it like a password; RUNOS_TOKEN takes it):")
			fmt.Fprintln(w, t.Token)
			return nil
		}),
	}
	c.Flags().StringVar(&name, "name", "", "the token's name: letters, digits, dots, dashes (unique among live tokens)")
	c.Flags().StringVar(&expires, "expires", "90d", "how long it lasts (90d, 2w, 12h; at most 366d)")
	c.Flags().StringVar(&aid, "aid", "", "the account, when you operate several")
	c.Flags().BoolVar(&asJSON, "json", false, "print the token, secret included, as JSON")
	_ = c.MarkFlagRequired("name")
	return c
}

func (a *app) tokensListCmd() *cobra.Command {
	var aid string
	var asJSON bool
	c := &cobra.Command{
		Use:     "list",
		Short:   "List the account's operator tokens (never their secrets)",
		Example: `  runos tokens list`,
		Args:    exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			ts, err := opCall(cmd.Context(), a, "list tokens", func(ctx context.Context, c *api.Client) ([]api.APIToken, error) {
				return c.Tokens(ctx, aid)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSONList(a.env.Stdout, ts)
			}
			now := a.env.Now()
			t := newTable(a.env.Stdout, "ID", "NAME", "STATE", "CREATED", "EXPIRES", "LAST USED", "BY")
			for _, k := range ts {
				exp := "never"
				if !k.ExpiresAt.IsZero() {
					exp = fmtTime(k.ExpiresAt, now)
				}
				created := k.CreatedBy
				if k.State == api.TokenRevoked {
					created += "; revoked by " + k.RevokedBy
				}
				t.row(k.ID, k.Name, k.State, fmtTime(k.CreatedAt, now), exp, fmtAgo(k.LastUsed, now), created)
			}
			t.flush()
			return nil
		}),
	}
	c.Flags().StringVar(&aid, "aid", "", "the account, when you operate several")
	c.Flags().BoolVar(&asJSON, "json", false, "print the tokens as JSON")
	return c
}

func (a *app) tokensRevokeCmd() *cobra.Command {
	var aid string
	var asJSON bool
	c := &cobra.Command{
		Use:   "revoke NAME|ID",
		Short: "Revoke an operator token: refused from now on",
		Example: `  runos tokens revoke ci
  runos tokens revoke world-file`,
		Args: exactArgs("NAME|ID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			k, err := opCall(cmd.Context(), a, "revoke token "+args[0], func(ctx context.Context, c *api.Client) (*api.APIToken, error) {
				return c.RevokeToken(ctx, aid, args[0])
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, k)
			}
			fmt.Fprintf(a.env.Stdout, "Revoked token %s (%s): control refuses it from now on.\n", k.Name, k.ID)
			if strings.TrimSpace(a.env.Getenv(EnvToken)) != "" {
				fmt.Fprintln(a.env.Stderr, "If RUNOS_TOKEN holds it, the next command will be refused.")
			}
			return nil
		}),
	}
	c.Flags().StringVar(&aid, "aid", "", "the account, when you operate several")
	c.Flags().BoolVar(&asJSON, "json", false, "print the revoked token as JSON")
	return c
}
