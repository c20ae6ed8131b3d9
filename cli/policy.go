package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
)

// maxPolicyFile bounds what `policy set` reads (control's own limit is
// 1 MiB, in a JSON body).
const maxPolicyFile = 2 << 20

func (a *app) policyCmd() *cobra.Command {
	return a.group("policy", "Show, set and test the account's access policy",
		`The access policy says which groups may connect to which cluster and what
they may reach there, in one versioned document per account:

  version 4
  group oncall: ada@example.com, bob@example.com
  allow group:oncall -> ky3: *
  allow * -> staging: *
  allow group:contractors -> ky3: 10.96.0.20:5432/tcp, 10.96.1.0/24:80-443
  operate group:oncall -> ky3: move-services, revoke-devices

An account without a policy lets every user connect to every cluster. With
one, a join to a cluster no rule allows is refused, naming the cluster.

To change it: runos policy get > policy.txt, edit it, raise its version
line, runos policy set policy.txt. A document whose version is not higher
than the one in force is refused (an edit of an old copy, or a replay),
and so is one naming an unknown group or cluster, with every bad line named.

This needs the operator role on the account (runos login first) or its
token (RUNOS_TOKEN), or an "operate … -> *: set-policy" rule of its
policy for the user signed in with runos login.`,
		a.policyGetCmd(), a.policySetCmd(), a.policyTestCmd())
}

func (a *app) policyGetCmd() *cobra.Command {
	var aid string
	var asJSON bool
	c := &cobra.Command{
		Use:     "get",
		Short:   "Print the policy document in force",
		Example: `  runos policy get > policy.txt`,
		Args:    exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			p, err := inAccount(cmd.Context(), a, "read the policy", "", aid, func(ctx context.Context, c *api.Client, aid string) (*api.Policy, error) {
				return c.Policy(ctx, aid)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, p)
			}
			if p.Version == 0 && p.Document == "" {
				fmt.Fprintf(a.env.Stderr, "Account %s has no policy: every user may connect to every cluster.\n", p.AID)
				return nil
			}
			doc := p.Document
			if !strings.HasSuffix(doc, "\n") {
				doc += "\n"
			}
			_, err = io.WriteString(a.env.Stdout, doc)
			return err
		}),
	}
	c.Flags().StringVar(&aid, "aid", "", "the account, when you belong to several")
	c.Flags().BoolVar(&asJSON, "json", false, "print {aid, version, document, setBy, setAt} as JSON")
	return c
}

// readDocument reads FILE, or standard input for "-".
func (a *app) readDocument(path string) (string, error) {
	var r io.Reader
	if path == "-" {
		if a.env.Stdin == nil {
			return "", usagef("no standard input to read the policy from")
		}
		r = a.env.Stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return "", usagef("read the policy: %v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPolicyFile+1))
	if err != nil {
		return "", fmt.Errorf("read the policy from %s: %w", path, err)
	}
	if len(b) > maxPolicyFile {
		return "", usagef("%s is over %d bytes: not a policy document", path, maxPolicyFile)
	}
	return string(b), nil
}

func (a *app) policySetCmd() *cobra.Command {
	var aid string
	var asJSON bool
	c := &cobra.Command{
		Use:   "set FILE|-",
		Short: "Set the policy from a file (or - for standard input)",
		Example: `  runos policy set policy.txt
  runos policy get | sed 's/^version 4$/version 5/' | runos policy set -`,
		Args: exactArgs("FILE|-"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			doc, err := a.readDocument(args[0])
			if err != nil {
				return err
			}
			p, err := inAccount(cmd.Context(), a, "set the policy", "runos policy get", aid, func(ctx context.Context, c *api.Client, aid string) (*api.Policy, error) {
				return c.SetPolicy(ctx, aid, doc)
			})
			var ae *api.Error
			if errors.As(err, &ae) && len(ae.Details) > 1 {
				for _, d := range ae.Details {
					fmt.Fprintf(a.env.Stderr, "%s: %s\n", args[0], d)
				}
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, p)
			}
			fmt.Fprintf(a.env.Stdout, "Policy version %d of %s is in force.\n", p.Version, p.AID)
			return nil
		}),
	}
	c.Flags().StringVar(&aid, "aid", "", "the account, when you belong to several")
	c.Flags().BoolVar(&asJSON, "json", false, "print the policy set as JSON")
	return c
}

func (a *app) policyTestCmd() *cobra.Command {
	var aid string
	var q api.PolicyTestRequest
	var asJSON bool
	c := &cobra.Command{
		Use:   "test --user EMAIL --to CID[:ADDRESS[:PORT][/PROTO]]",
		Short: "Ask whether a user may connect to a cluster or reach an address there",
		Long: `Ask what the policy in force decides: may the user connect to the cluster
(--to ky3), or reach an address there (--to ky3:10.96.0.20:5432, a port
without a protocol is TCP; ky3:10.96.0.10:53/udp; ky3:10.96.0.20 for every
port). It prints allow or deny and the rule that decided.

The exit status is 0 for allow and 1 for deny, so scripts can use it.`,
		Example: `  runos policy test --user bob@example.com --to ky3
  runos policy test --user bob@example.com --to ky3:10.96.0.20:5432 && echo allowed`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			d, err := inAccount(cmd.Context(), a, "test the policy", "", aid, func(ctx context.Context, c *api.Client, aid string) (*api.PolicyDecision, error) {
				return c.TestPolicy(ctx, aid, q)
			})
			if err != nil {
				return err
			}
			if asJSON {
				err = printJSON(a.env.Stdout, d)
			} else {
				verdict := "deny"
				if d.Allow {
					verdict = "allow"
				}
				fmt.Fprintf(a.env.Stdout, "%s: %s\n", verdict, d.Reason)
			}
			if err == nil && !d.Allow {
				return quietExit{code: ExitError}
			}
			return err
		}),
	}
	c.Flags().StringVar(&q.User, "user", "", "the user (email)")
	c.Flags().StringVar(&q.To, "to", "", "the cluster (ky3), or an address in it (ky3:10.96.0.20:5432)")
	c.Flags().StringVar(&aid, "aid", "", "the account, when you belong to several")
	c.Flags().BoolVar(&asJSON, "json", false, "print {allow, line, rule, reason} as JSON")
	_ = c.MarkFlagRequired("user")
	_ = c.MarkFlagRequired("to")
	return c
}
