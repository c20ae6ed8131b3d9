package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
)

// Devices and sessions an operator manages (runos devices, runos
// sessions), and a user's own devices (runos vpn devices, through the
// daemon's session).

func (a *app) devicesCmd() *cobra.Command {
	return a.group("devices", "List, show, revoke and delete the devices of your account",
		`Each machine that signed in to the VPN is a device: its own key, one
tunnel address, the clusters it joined. These operator verbs see every
device of your account's users.

Revoking a device ends its session and refuses its key from then on: its
peers leave every gateway within a second, and the machine shows its
session as revoked until someone signs in on it again (with a new key).
Deleting a revoked (or signed-out) device frees its address.

These are operator verbs: runos login first, or set RUNOS_TOKEN.`,
		a.devicesListCmd(), a.devicesShowCmd(), a.devicesRevokeCmd(), a.devicesDeleteCmd())
}

func (a *app) devicesListCmd() *cobra.Command {
	var q api.DeviceQuery
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the devices of your account",
		Example: `  runos devices list
  runos devices list --cid ky3
  runos devices list --user ops@rjwrn.example.com --json`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if q.CID != "" {
				if err := cidArg(q.CID); err != nil {
					return err
				}
			}
			ds, err := opCall(cmd.Context(), a, "list devices", func(ctx context.Context, c *api.Client) ([]api.DeviceDetail, error) {
				return c.Devices(ctx, q)
			})
			if err != nil {
				return err
			}
			return a.printDevices(ds, "", asJSON, true)
		}),
	}
	c.Flags().StringVar(&q.CID, "cid", "", "only devices joined to this cluster")
	c.Flags().StringVar(&q.User, "user", "", "only this user's devices (email)")
	c.Flags().StringVar(&q.AID, "aid", "", "the account, when you operate several")
	c.Flags().BoolVar(&asJSON, "json", false, "print the devices as JSON")
	return c
}

// printDevices prints devices as JSON or a table; self is this machine's
// device id ("" when unknown), withUser adds the USER column.
func (a *app) printDevices(ds []api.DeviceDetail, self string, asJSON, withUser bool) error {
	if asJSON {
		return printJSONList(a.env.Stdout, ds)
	}
	if len(ds) == 0 {
		fmt.Fprintln(a.env.Stdout, "No devices.")
		return nil
	}
	now := a.env.Now()
	head := []string{"ID", "NAME", "OS", "ADDRESS", "STATE", "CLUSTERS", "HANDSHAKE", "LAST SEEN"}
	if withUser {
		head = slices.Insert(head, 1, "USER")
	}
	t := newTable(a.env.Stdout, head...)
	for _, d := range ds {
		name := d.Name
		if d.ID == self {
			name += " (this device)"
		}
		var cids []string
		for _, c := range d.Clusters {
			cids = append(cids, c.CID)
		}
		row := []string{d.ID, name, d.OS, d.Address, d.State, strings.Join(cids, ","), fmtAgo(d.LastHandshake, now), fmtAgo(d.LastSeen, now)}
		if withUser {
			row = slices.Insert(row, 1, d.User)
		}
		t.row(row...)
	}
	t.flush()
	return nil
}

func (a *app) devicesShowCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "show ID",
		Short:   "Show one device: its state, session, clusters and handshakes",
		Example: `  runos devices show dev-3fa9c2d1e0b4`,
		Args:    exactArgs("ID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			id := args[0]
			d, err := opCall(cmd.Context(), a, "show device "+id, func(ctx context.Context, c *api.Client) (*api.DeviceDetail, error) {
				return c.Device(ctx, id)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, d)
			}
			renderDevice(a.env.Stdout, d, a.env.Now())
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the device as JSON")
	return c
}

func renderDevice(w io.Writer, d *api.DeviceDetail, now time.Time) {
	line := func(k, v string) {
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(w, "%-15s %s\n", k, v)
	}
	line("Device", d.ID+" ("+d.Name+", "+d.OS+")")
	line("User", d.User)
	line("Address", d.Address)
	line("Public key", d.PublicKey)
	state := d.State
	switch d.State {
	case api.DeviceActive:
		state += fmt.Sprintf(": session %s until %s", d.SessionID, fmtTime(d.SessionExpiresAt, now))
	case api.DeviceRevoked:
		state += fmt.Sprintf(" at %s by %s: its key is refused; delete it to free its address (runos devices delete %s)",
			fmtTime(d.RevokedAt, now), d.RevokedBy, d.ID)
	case api.DeviceSignedOut:
		state += ": no live session"
	}
	line("State", state)
	line("Registered", fmtTime(d.CreatedAt, now))
	line("Last seen", fmtAgo(d.LastSeen, now))
	if len(d.Clusters) == 0 {
		line("Clusters", "none")
	}
	for i, c := range d.Clusters {
		k := ""
		if i == 0 {
			k = "Clusters"
		}
		line(k, c.CID+", last handshake "+fmtAgo(c.LastHandshake, now))
	}
}

func (a *app) devicesRevokeCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "revoke ID",
		Short: "Cut a device off: end its session and refuse its key from now on",
		Long: `Revoke a device (a stolen laptop): its session ends and its key is refused
from then on, so its peers leave every gateway within a second and it
cannot reconnect. The machine shows its session as revoked; someone
signing in on it again registers a new key, a new device.

The device keeps its address until it is deleted (runos devices delete).`,
		Example: `  runos devices revoke dev-3fa9c2d1e0b4`,
		Args:    exactArgs("ID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			id := args[0]
			d, err := opCall(cmd.Context(), a, "revoke device "+id, func(ctx context.Context, c *api.Client) (*api.DeviceDetail, error) {
				return c.RevokeDevice(ctx, id)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, d)
			}
			var cids []string
			for _, c := range d.Clusters {
				cids = append(cids, c.CID)
			}
			fmt.Fprintf(a.env.Stdout, "Revoked %s (%s of %s): its session ended and its key is refused.\n", d.ID, d.Name, d.User)
			if len(cids) > 0 {
				fmt.Fprintf(a.env.Stdout, "It left the VPN servers of %s.\n", strings.Join(cids, ", "))
			}
			fmt.Fprintf(a.env.Stdout, "Delete it to free its address %s: runos devices delete %s\n", d.Address, d.ID)
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the revoked device as JSON")
	return c
}

func (a *app) devicesDeleteCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a revoked or signed-out device, freeing its address",
		Long: `Delete a device that is revoked or has no live session, freeing its tunnel
address for other devices. A device in use is refused: revoke it first.
Devices idle for --device-idle-ttl (30 days) are deleted by control itself.`,
		Example: `  runos devices delete dev-3fa9c2d1e0b4`,
		Args:    exactArgs("ID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if _, err := opCall(cmd.Context(), a, "delete device "+id, func(ctx context.Context, c *api.Client) (struct{}, error) {
				return struct{}{}, c.DeleteDevice(ctx, id)
			}); err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, map[string]any{"id": id, "deleted": true})
			}
			fmt.Fprintf(a.env.Stdout, "Deleted device %s; its address is free.\n", id)
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print {id, deleted} as JSON")
	return c
}

func (a *app) sessionsCmd() *cobra.Command {
	return a.group("sessions", "List and end a user's sign-ins",
		`A session is one sign-in (24 hours): runos vpn up, RunOS Desktop, runos
login or the console. Ending one signs it out on control: the devices bound
to it drop off every gateway within a second, and the next runos vpn up on
them signs in again (with the same key: to refuse a key, revoke the
device).

These are operator verbs: runos login first, or set RUNOS_TOKEN.`,
		a.sessionsListCmd(), a.sessionsRevokeCmd())
}

func (a *app) sessionsListCmd() *cobra.Command {
	var user, aid string
	var asJSON bool
	c := &cobra.Command{
		Use:     "list --user EMAIL",
		Short:   "List a user's live sessions",
		Example: `  runos sessions list --user ops@rjwrn.example.com`,
		Args:    exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			ss, err := opCall(cmd.Context(), a, "list the sessions of "+user, func(ctx context.Context, c *api.Client) ([]api.Session, error) {
				return c.Sessions(ctx, aid, user)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSONList(a.env.Stdout, ss)
			}
			if len(ss) == 0 {
				fmt.Fprintf(a.env.Stdout, "%s has no live session.\n", user)
				return nil
			}
			now := a.env.Now()
			t := newTable(a.env.Stdout, "ID", "CLIENT", "SIGNED IN", "EXPIRES", "DEVICES")
			for _, s := range ss {
				t.row(s.ID, s.Client, fmtTime(s.CreatedAt, now), fmtTime(s.ExpiresAt, now), strings.Join(s.Devices, ","))
			}
			t.flush()
			return nil
		}),
	}
	c.Flags().StringVar(&user, "user", "", "the user (email)")
	c.Flags().StringVar(&aid, "aid", "", "the account, when you operate several")
	c.Flags().BoolVar(&asJSON, "json", false, "print the sessions as JSON")
	_ = c.MarkFlagRequired("user")
	return c
}

func (a *app) sessionsRevokeCmd() *cobra.Command {
	var user, aid string
	var asJSON bool
	c := &cobra.Command{
		Use:   "revoke --user EMAIL [ID]",
		Short: "End one of a user's sessions, or all of them",
		Example: `  runos sessions revoke --user ops@rjwrn.example.com            # every session
  runos sessions revoke --user ops@rjwrn.example.com ses-1a2b3c4d5e6f`,
		Args: cobra.MaximumNArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			what := "end the sessions of " + user
			if len(args) == 1 {
				what = "end session " + args[0] + " of " + user
			}
			out, err := opCall(cmd.Context(), a, what, func(ctx context.Context, c *api.Client) (*api.EndedSessions, error) {
				if len(args) == 1 {
					return c.EndUserSession(ctx, args[0])
				}
				return c.EndUserSessions(ctx, aid, user)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, out)
			}
			fmt.Fprintf(a.env.Stdout, "Ended %s of %s: %s.\n", plural(len(out.Ended), "session"), user, strings.Join(out.Ended, ", "))
			if len(out.Cut) > 0 {
				fmt.Fprintf(a.env.Stdout, "Kept %s: also in clusters of accounts you do not operate; their devices left your clusters.\n",
					strings.Join(out.Cut, ", "))
			}
			if len(out.Devices) > 0 {
				where := "every gateway"
				if len(out.Cut) > 0 {
					where = "your gateways"
				}
				fmt.Fprintf(a.env.Stdout, "Devices %s dropped off %s.\n", strings.Join(out.Devices, ", "), where)
			}
			return nil
		}),
	}
	c.Flags().StringVar(&user, "user", "", "the user (email)")
	c.Flags().StringVar(&aid, "aid", "", "the account, when you operate several")
	c.Flags().BoolVar(&asJSON, "json", false, "print {ended, devices, cut} as JSON")
	_ = c.MarkFlagRequired("user")
	return c
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// vpnDevicesCmd is the user's own devices, through the daemon's session.
func (a *app) vpnDevicesCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "devices",
		Short: "List your devices; remove one you no longer use",
		Long: `List the devices you signed in to the VPN from, as control knows them
(this one is marked), with the session the daemon holds: runos vpn up first.

runos vpn devices remove ID removes one (a lost laptop, an old machine): it
is signed out, its key is refused from then on, and its address is freed.
A user may have 20 devices (runos-control --max-devices-per-user); past
that, remove one to sign in from a new machine.`,
		Example: `  runos vpn devices
  runos vpn devices remove dev-3fa9c2d1e0b4`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			d := a.daemon()
			st, err := d.Status(cmd.Context())
			if err != nil {
				return fmt.Errorf("vpn devices: %w", err)
			}
			a.warnDaemonVersion(st.Version)
			ds, err := d.Devices(cmd.Context())
			if err != nil {
				return fmt.Errorf("vpn devices: %w", err)
			}
			return a.printDevices(ds, st.Session.DeviceID, asJSON, false)
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print your devices as JSON")
	c.AddCommand(a.vpnDevicesRemoveCmd())
	return c
}

func (a *app) vpnDevicesRemoveCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "remove ID",
		Short:   "Remove one of your devices: signed out, its key refused, its address freed",
		Example: `  runos vpn devices remove dev-3fa9c2d1e0b4`,
		Args:    exactArgs("ID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			id := args[0]
			d := a.daemon()
			before, err := d.Status(cmd.Context())
			if err != nil {
				return fmt.Errorf("remove device %s: %w", id, err)
			}
			st, err := d.RemoveDevice(cmd.Context(), id)
			if err != nil {
				return fmt.Errorf("remove device %s: %w", id, signedOutHint(err))
			}
			if asJSON {
				return printJSON(a.env.Stdout, map[string]any{"id": id, "removed": true, "thisDevice": id == before.Session.DeviceID})
			}
			a.warnDaemonVersion(st.Version)
			if id == before.Session.DeviceID {
				fmt.Fprintf(a.env.Stdout, "Removed this device (%s): it is signed out as revoked; `runos vpn up` signs in again with a fresh key.\n", id)
				return nil
			}
			fmt.Fprintf(a.env.Stdout, "Removed device %s: its session ended, its key is refused and its address is free.\n", id)
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print {id, removed, thisDevice} as JSON")
	return c
}
