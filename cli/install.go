package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/installer"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/access"
)

// installFlags are runos vpn install's and uninstall's. The hidden ones
// place a second, side-by-side service (the end-to-end tests install one
// next to whatever the machine runs).
type installFlags struct {
	operator, caFile string
	purge, json      bool

	allowedRoutes, allowedDomains []string

	name, binary, stateDir, iface, logFile string
	startTimeout                           time.Duration
}

func (a *app) addHiddenInstallFlags(c *cobra.Command, f *installFlags) {
	c.Flags().StringVar(&f.name, "service-name", installer.DefaultName, "the service's name")
	c.Flags().StringVar(&f.binary, "binary", "", "where runos is installed (default "+installer.DefaultBinary()+", or where a package put it)")
	c.Flags().StringVar(&f.stateDir, "state-dir", platform.DefaultStateDir(), "the daemon's state directory")
	c.Flags().StringVar(&f.iface, "interface", "", "the tunnel interface (default wg1)")
	c.Flags().StringVar(&f.logFile, "log-file", "", "the daemon's log under System V init and launchd")
	for _, n := range []string{"service-name", "binary", "state-dir", "interface", "log-file"} {
		_ = c.Flags().MarkHidden(n)
	}
}

// installOptions maps the flags to the installer's Options.
func (a *app) installOptions(f installFlags) (installer.Options, error) {
	if f.startTimeout < 0 {
		return installer.Options{}, usagef("--timeout must be positive, got %s", f.startTimeout)
	}
	for flag, p := range map[string]string{"--binary": f.binary, "--state-dir": f.stateDir} {
		if p != "" && !filepath.IsAbs(p) {
			return installer.Options{}, usagef("%s %q: give an absolute path", flag, p)
		}
	}
	ca := f.caFile
	if ca != "" {
		abs, err := filepath.Abs(ca)
		if err != nil {
			return installer.Options{}, usagef("--ca-file %q: %v", ca, err)
		}
		ca = abs
	}
	trust, err := parseTrust(f.allowedRoutes, f.allowedDomains)
	if err != nil {
		return installer.Options{}, err
	}
	var it installer.Trust
	for _, p := range trust.Routes {
		it.AllowedRoutes = append(it.AllowedRoutes, p.String())
	}
	for _, d := range trust.Domains {
		it.AllowedDNSDomains = append(it.AllowedDNSDomains, strings.Trim(d, "."))
	}
	return installer.Options{
		Trust: it,
		Name:  f.name, Binary: f.binary, StateDir: f.stateDir, Socket: a.socketPath(),
		Interface: f.iface, CAFile: ca, LogFile: f.logFile, Operator: f.operator, Purge: f.purge,
		Getenv: a.env.Getenv, Progress: a.env.Stderr, StartTimeout: f.startTimeout,
	}, nil
}

func (a *app) vpnInstallCmd() *cobra.Command {
	var f installFlags
	c := &cobra.Command{
		Use:   "install",
		Short: "Install the background service (once per machine, " + platform.AdminHow + ")",
		Long: `Install the VPN daemon (runos vpnd) as a system service that starts at boot
and restarts after a failure: systemd, System V init where there is no
systemd, launchd on macOS, the service manager on Windows.

It copies this runos to ` + installer.DefaultBinary() + ` (unless it already runs from
there, or from where a .deb or .rpm put it), creates the state directory ` + platform.DefaultStateDir() + ` (0700), records
` + installer.InvokingUserWords + ` as the operator, registers the service and starts it,
and returns once the daemon answers on its socket.

An organisation whose control allocates from its own pools names them
with --allowed-routes and --allowed-dns-domains (the daemon's own flags):
they are recorded in the state directory and passed to the daemon, and an
upgrade without them keeps them.

Who may steer the VPN (up, connect, disconnect, down): ` + access.AdminWord() + `, the operator and
members of the ` + access.Group + ` group; everyone else may read the status.
--operator names another user instead.

Running it again upgrades in place: the service is stopped, runos replaced,
the service registered anew and started. If anything fails, what this run
changed is undone (an upgrade puts the previous version back).`,
		Example: `  ` + platform.AdminPrefix + `runos vpn install
  ` + platform.AdminPrefix + `runos vpn install --operator alice
  ` + platform.AdminPrefix + `runos vpn install --ca-file ./control-ca.pem   # a control with its own CA
  ` + platform.AdminPrefix + `runos vpn install --allowed-routes 10.64.0.0/16,10.65.0.0/16 --allowed-dns-domains corp.example`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			o, err := a.installOptions(f)
			if err != nil {
				return err
			}
			res, err := installer.Install(cmd.Context(), o)
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(a.env.Stdout, res)
			}
			a.printInstalled(res)
			return nil
		}),
	}
	c.Flags().StringVar(&f.operator, "operator", "", "the user who may steer the VPN besides "+access.AdminWord()+" (default: "+installer.InvokingUserWords+")")
	c.Flags().StringVar(&f.caFile, "ca-file", "", "PEM CA that signs control's certificate (copied into the state directory)")
	c.Flags().DurationVar(&f.startTimeout, "timeout", installer.DefaultStartTimeout, "how long to wait for the daemon to answer")
	c.Flags().BoolVar(&f.json, "json", false, "print what was installed as JSON")
	c.Flags().StringSliceVar(&f.allowedRoutes, "allowed-routes", nil,
		"the daemon's --allowed-routes: prefixes control may route through the tunnel (default: the VPN's pools, or what an earlier install recorded)")
	c.Flags().StringSliceVar(&f.allowedDomains, "allowed-dns-domains", nil,
		"the daemon's --allowed-dns-domains: DNS domains control may send besides each cluster's own")
	a.addHiddenInstallFlags(c, &f)
	return c
}

func (a *app) printInstalled(r *installer.Result) {
	verb := "Installed"
	if r.Upgraded {
		verb = "Upgraded"
	}
	w := a.env.Stdout
	fmt.Fprintf(w, "%s the RunOS VPN service %s (%s); the daemon runs %s.\n", verb, r.Service, r.Platform, r.Version)
	t := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(t, "  daemon\t%s vpnd\n  state\t%s\n  socket\t%s\n", r.Binary, r.StateDir, r.Socket)
	if r.Operator != "" {
		fmt.Fprintf(t, "  operator\t%s may steer the VPN (so may %s and the %s group)\n", r.Operator, access.AdminWord(), access.Group)
	} else {
		fmt.Fprintf(t, "  operator\tnone: only %s and the %s group may steer the VPN (add one: %s)\n", access.AdminWord(), access.Group, platform.AdminCommand("vpn install --operator USER"))
	}
	if len(r.Trust.AllowedRoutes) > 0 {
		fmt.Fprintf(t, "  allowed routes\t%s\n", strings.Join(r.Trust.AllowedRoutes, ", "))
	}
	if len(r.Trust.AllowedDNSDomains) > 0 {
		fmt.Fprintf(t, "  allowed DNS domains\t%s\n", strings.Join(r.Trust.AllowedDNSDomains, ", "))
	}
	if r.Log != "" {
		fmt.Fprintf(t, "  log\t%s\n", r.Log)
	}
	_ = t.Flush()
	fmt.Fprintln(w, "Next: runos vpn up")
}

func (a *app) vpnUninstallCmd() *cobra.Command {
	var f installFlags
	c := &cobra.Command{
		Use:   "uninstall",
		Short: "Stop and remove the background service (" + platform.AdminHow + ")",
		Long: `Stop the VPN daemon's service and remove it, then undo whatever the daemon
changed: split DNS, routes and the tunnel interface.

The state directory stays, with this machine's device key (its identity
towards control): installing again brings the same device back. --purge
removes it too, with the operator record and the service's log.

runos itself stays where it is. Running it when nothing is installed only
cleans up.`,
		Example: `  ` + platform.AdminPrefix + `runos vpn uninstall
  ` + platform.AdminPrefix + `runos vpn uninstall --purge`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			o, err := a.installOptions(f)
			if err != nil {
				return err
			}
			res, err := installer.Uninstall(cmd.Context(), o)
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(a.env.Stdout, res)
			}
			w := a.env.Stdout
			if res.Removed {
				fmt.Fprintf(w, "Uninstalled the RunOS VPN service %s (%s).\n", res.Service, res.Platform)
			} else {
				fmt.Fprintf(w, "The RunOS VPN service %s was not installed; cleaned up what a daemon left.\n", res.Service)
			}
			switch {
			case res.Purged:
				fmt.Fprintln(w, "Removed the state directory with the device key.")
			case res.DeviceKey != "":
				fmt.Fprintf(w, "The device key stays in %s; remove it with --purge.\n", res.DeviceKey)
			}
			return nil
		}),
	}
	c.Flags().BoolVar(&f.purge, "purge", false, "also remove the state directory with the device key, and the log")
	c.Flags().BoolVar(&f.json, "json", false, "print what was removed as JSON")
	a.addHiddenInstallFlags(c, &f)
	return c
}
