package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
)

// An account's users, and removing one: the operator's way to end a
// person's access at once (their sessions end, their devices leave every
// gateway).

func (a *app) usersCmd() *cobra.Command {
	return a.group("users", "List the account's users and remove them",
		`Users are the people of an account: from the world file (with a
password), or created at their first sign-in through the account's
identity provider. runos users remove ends a user's access at once.

This needs the operator role on the account (runos login first) or its
token (RUNOS_TOKEN), or an "operate … -> *: manage-users" rule of its
policy for the user signed in with runos login; such a rule removes no
operator and no user another operate rule grants operator verbs.`,
		a.usersListCmd(), a.usersRemoveCmd())
}

func (a *app) usersListCmd() *cobra.Command {
	var aid string
	var asJSON bool
	c := &cobra.Command{
		Use:     "list",
		Short:   "List the account's users, their role and groups",
		Example: `  runos users list`,
		Args:    exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			us, err := inAccount(cmd.Context(), a, "list users", "", aid, func(ctx context.Context, c *api.Client, aid string) ([]api.User, error) {
				return c.Users(ctx, aid)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSONList(a.env.Stdout, us)
			}
			if len(us) == 0 {
				fmt.Fprintln(a.env.Stdout, "No users.")
				return nil
			}
			t := newTable(a.env.Stdout, "USER", "ROLE", "SIGNS IN WITH", "GROUPS")
			for _, u := range us {
				role, with, groups := "user", "identity provider", strings.Join(u.Groups, ", ")
				if u.Operator {
					role = "operator"
				}
				if u.Password {
					with = "password"
				}
				if groups == "" {
					groups = "-"
				}
				t.row(u.Email, role, with, groups)
			}
			t.flush()
			return nil
		}),
	}
	c.Flags().StringVar(&aid, "aid", "", "the account, when you belong to several")
	c.Flags().BoolVar(&asJSON, "json", false, "print the users as JSON")
	return c
}

func (a *app) usersRemoveCmd() *cobra.Command {
	var aid string
	var asJSON bool
	c := &cobra.Command{
		Use:   "remove EMAIL",
		Short: "Remove a user from the account, ending their access at once",
		Long: `Remove a user from the account. Their access ends at once: every live
session of theirs ends (their machines show that an operator removed them),
their devices are removed and leave every gateway within a second, and
they leave the account's groups. The audit log records it.

A user who also belongs to other accounts keeps their sessions and devices
for those; their devices only leave this account's clusters.

A user who signs in through the identity provider is created again at
their next sign-in if the provider still lets them in: remove or disable
them there to keep them out.`,
		Example: `  runos users remove bob@example.com`,
		Args:    exactArgs("EMAIL"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			email := args[0]
			out, err := inAccount(cmd.Context(), a, "remove user "+email, "runos users list", aid,
				func(ctx context.Context, c *api.Client, aid string) (*api.RemovedUser, error) {
					return c.RemoveUser(ctx, aid, email)
				})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, out)
			}
			a.printRemoved(out)
			return nil
		}),
	}
	c.Flags().StringVar(&aid, "aid", "", "the account, when you belong to several")
	c.Flags().BoolVar(&asJSON, "json", false, "print what was done as JSON")
	return c
}

func (a *app) printRemoved(out *api.RemovedUser) {
	w := a.env.Stdout
	fmt.Fprintf(w, "Removed %s from %s.\n", out.Email, out.AID)
	if out.Elsewhere {
		fmt.Fprintf(w, "They also belong to other accounts: their sessions are kept for those; %d device(s) left the clusters of %s.\n", len(out.Cut), out.AID)
	} else {
		fmt.Fprintf(w, "Sessions ended: %d. Devices removed: %d.\n", len(out.Sessions), len(out.Devices))
	}
	if len(out.Groups) > 0 {
		fmt.Fprintf(w, "Groups left: %s.\n", strings.Join(out.Groups, ", "))
	}
}
