package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
)

// Groups of users that an account's policy names (runos policy): created
// empty, members added and removed by operators (or a manage-users rule).

// account is --aid, or the one account the caller belongs to.
func account(ctx context.Context, c *api.Client, aid string) (string, error) {
	if aid != "" {
		return aid, nil
	}
	me, err := c.Me(ctx)
	if err != nil {
		return "", err
	}
	if len(me.Accounts) != 1 {
		return "", usagef("you belong to %d accounts (%s): say which with --aid", len(me.Accounts), strings.Join(me.Accounts, ", "))
	}
	return me.Accounts[0], nil
}

// inAccount is opChange for a request about one account: it finds the
// account first (--aid, or the caller's only one).
func inAccount[T any](ctx context.Context, a *app, what, check, aid string, fn func(context.Context, *api.Client, string) (T, error)) (T, error) {
	return opChange(ctx, a, what, check, func(ctx context.Context, c *api.Client) (T, error) {
		acct, err := account(ctx, c, aid)
		if err != nil {
			var zero T
			return zero, err
		}
		return fn(ctx, c, acct)
	})
}

func (a *app) groupsCmd() *cobra.Command {
	return a.group("groups", "List and change the account's groups of users",
		`Groups of users are what an account's access policy names (allow
group:oncall -> ky3: *; see runos policy). A group is created empty, then
users are added and removed by email; each change reaches the gateways at
once and is in the audit log.

This needs the operator role on the account (runos login first) or its
token (RUNOS_TOKEN), or an "operate … -> *: manage-users" rule of its
policy for the user signed in with runos login; such a rule changes the
members of no group an operate rule names.`,
		a.groupsListCmd(), a.groupsCreateCmd(), a.groupsMemberCmd(true), a.groupsMemberCmd(false))
}

func (a *app) groupsListCmd() *cobra.Command {
	var aid string
	var asJSON bool
	c := &cobra.Command{
		Use:     "list",
		Short:   "List the account's groups and their members",
		Example: `  runos groups list`,
		Args:    exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			gs, err := inAccount(cmd.Context(), a, "list groups", "", aid, func(ctx context.Context, c *api.Client, aid string) ([]api.Group, error) {
				return c.Groups(ctx, aid)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSONList(a.env.Stdout, gs)
			}
			if len(gs) == 0 {
				fmt.Fprintln(a.env.Stdout, "No groups. Create one: runos groups create NAME")
				return nil
			}
			t := newTable(a.env.Stdout, "GROUP", "MEMBERS")
			for _, g := range gs {
				members := strings.Join(g.Members, ", ")
				if members == "" {
					members = "-"
				}
				t.row(g.Name, members)
			}
			t.flush()
			return nil
		}),
	}
	c.Flags().StringVar(&aid, "aid", "", "the account, when you belong to several")
	c.Flags().BoolVar(&asJSON, "json", false, "print the groups as JSON")
	return c
}

func (a *app) groupsCreateCmd() *cobra.Command {
	var aid string
	var asJSON bool
	c := &cobra.Command{
		Use:     "create NAME",
		Short:   "Create an empty group",
		Example: `  runos groups create oncall`,
		Args:    exactArgs("NAME"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			g, err := inAccount(cmd.Context(), a, "create group "+args[0], "runos groups list", aid,
				func(ctx context.Context, c *api.Client, aid string) (*api.Group, error) {
					return c.CreateGroup(ctx, aid, args[0])
				})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, g)
			}
			fmt.Fprintf(a.env.Stdout, "Created group %s. Add members: runos groups add %s EMAIL\n", g.Name, g.Name)
			return nil
		}),
	}
	c.Flags().StringVar(&aid, "aid", "", "the account, when you belong to several")
	c.Flags().BoolVar(&asJSON, "json", false, "print the group as JSON")
	return c
}

// groupsMemberCmd is `groups add` (add) or `groups remove`.
func (a *app) groupsMemberCmd(add bool) *cobra.Command {
	var aid string
	var asJSON bool
	verb, short, example := "remove", "Remove a user from a group", "  runos groups remove oncall bob@example.com"
	if add {
		verb, short, example = "add", "Add a user to a group", "  runos groups add oncall ada@example.com"
	}
	c := &cobra.Command{
		Use:     verb + " GROUP EMAIL",
		Short:   short,
		Example: example,
		Args:    exactArgs("GROUP", "EMAIL"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			group, email := args[0], args[1]
			g, err := inAccount(cmd.Context(), a, verb+" "+email+" in group "+group, "runos groups list", aid,
				func(ctx context.Context, c *api.Client, aid string) (*api.Group, error) {
					if add {
						return c.AddGroupMember(ctx, aid, group, email)
					}
					return c.RemoveGroupMember(ctx, aid, group, email)
				})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, g)
			}
			did := "Added " + email + " to"
			if !add {
				did = "Removed " + email + " from"
			}
			fmt.Fprintf(a.env.Stdout, "%s group %s (%d member(s)).\n", did, g.Name, len(g.Members))
			return nil
		}),
	}
	c.Flags().StringVar(&aid, "aid", "", "the account, when you belong to several")
	c.Flags().BoolVar(&asJSON, "json", false, "print the group as JSON")
	return c
}
