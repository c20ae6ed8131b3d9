package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
)

func (a *app) auditCmd() *cobra.Command {
	var q api.AuditQuery
	var asJSON bool
	c := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log: who changed what, newest first",
		Long: `Show the account's audit log, newest first: every change a person or a
token made (sign-ins and sign-outs, devices registered, joined, left,
revoked and deleted, sessions ended, VPN services added, moves and their
outcome, ingress changes, node deletions, tokens created and revoked), with
the time, the actor, the source address, the target and the outcome.

--kind takes a kind or its first part (device matches every device.*).
Kinds: ` + strings.Join(api.AuditKinds, ", ") + `.
A page holds --limit entries; the line after it says how to see older ones.

This needs the operator role on the account (runos login first) or its
token (RUNOS_TOKEN), or an "operate … -> *: read-audit" rule of its policy
for the user signed in with runos login.`,
		Example: `  runos audit
  runos audit --cid ky3 --kind move
  runos audit --actor ops@rjwrn.example.com --limit 100 --json`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if q.CID != "" {
				if err := cidArg(q.CID); err != nil {
					return err
				}
			}
			if q.Limit < 1 || q.Limit > 500 {
				return usagef("--limit %d: want 1 to 500", q.Limit)
			}
			p, err := opCall(cmd.Context(), a, "read the audit log", func(ctx context.Context, c *api.Client) (*api.AuditPage, error) {
				return c.Audit(ctx, q)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, p)
			}
			if len(p.Entries) == 0 {
				fmt.Fprintln(a.env.Stdout, "No audit entries.")
				return nil
			}
			now := a.env.Now()
			t := newTable(a.env.Stdout, "TIME", "ACTOR", "SOURCE", "KIND", "CID", "TARGET", "OUTCOME")
			for _, e := range p.Entries {
				actor := e.Actor
				if e.ActorKind == api.ActorToken {
					actor = "token " + actor
				}
				t.row(fmtTime(e.At, now), actor, e.Source, e.Kind, e.CID, e.Target, e.Outcome)
			}
			t.flush()
			if p.Next != 0 {
				fmt.Fprintf(a.env.Stdout, "Older entries: runos audit --before %d%s\n", p.Next, auditFlags(q))
			}
			return nil
		}),
	}
	c.Flags().StringVar(&q.CID, "cid", "", "only changes to this cluster")
	c.Flags().StringVar(&q.Actor, "actor", "", "only changes by this user (email) or token (its name)")
	c.Flags().StringVar(&q.Kind, "kind", "", "only this kind, or every kind under it (device)")
	c.Flags().IntVar(&q.Limit, "limit", 50, "how many entries (1 to 500)")
	c.Flags().Int64Var(&q.Before, "before", 0, "entries older than this id (the next page)")
	c.Flags().StringVar(&q.AID, "aid", "", "the account, when you operate several")
	c.Flags().BoolVar(&asJSON, "json", false, "print {entries, next} as JSON")
	return c
}

// auditFlags repeats the filters of q for the next page's command.
func auditFlags(q api.AuditQuery) string {
	var b strings.Builder
	for _, f := range [][2]string{{"cid", q.CID}, {"actor", q.Actor}, {"kind", q.Kind}, {"aid", q.AID}} {
		if f[1] != "" {
			fmt.Fprintf(&b, " --%s %s", f[0], f[1])
		}
	}
	if q.Limit != 50 {
		fmt.Fprintf(&b, " --limit %d", q.Limit)
	}
	return b.String()
}
