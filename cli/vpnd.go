package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/cli/config"
	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/installer"
	"github.com/runos/vpn/internal/version"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/platform/netmon"
	"github.com/runos/vpn/vpnd"
	"github.com/runos/vpn/vpnd/logring"
	"github.com/runos/vpn/vpnd/state"
)

// Daemon runs the privileged daemon; the real one is package vpnd.
type Daemon interface {
	Run(ctx context.Context, cfg vpnd.Config) error
	Cleanup(ctx context.Context, cfg vpnd.Config) error
}

type realDaemon struct{}

// Run goes through installer.RunDaemon: under the Windows service manager
// the program must answer its control dispatcher, and the clean-up of
// --cleanup runs after the daemon (the SCM has no ExecStopPost=);
// elsewhere it just runs.
func (realDaemon) Run(ctx context.Context, cfg vpnd.Config) error {
	return installer.RunDaemon(ctx,
		func(ctx context.Context) error { return vpnd.Run(ctx, cfg) },
		func(ctx context.Context) error { return vpnd.Cleanup(ctx, cfg) })
}
func (realDaemon) Cleanup(ctx context.Context, cfg vpnd.Config) error { return vpnd.Cleanup(ctx, cfg) }

type vpndFlags struct {
	stateDir, caFile, iface, logLevel, logFile string
	cleanup, longPoll                          bool
	mtu                                        int
	allowedRoutes, allowedDomains              []string
}

func (a *app) vpndCmd() *cobra.Command {
	var f vpndFlags
	c := &cobra.Command{
		Use:   "vpnd",
		Short: "Run the VPN daemon (started by the system service)",
		Long: `Run the privileged VPN daemon in the foreground. The system service
installed by ` + platform.AdminCommand("vpn install") + ` runs this; you rarely run it by hand.

It owns the tunnel wg1, the device key in its state directory (0700; the
private key never leaves the machine), the session handed over by runos vpn
up, each cluster's connection and split DNS, and serves the local API on its
socket. It stops on SIGINT or SIGTERM and undoes its changes.

--mtu sets the tunnel's MTU (default 1420, WireGuard's over a 1500-byte
path; else the mtu key of runos config). Over a smaller uplink the daemon
clamps TCP to fit it, and where UDP gets no answer it carries WireGuard over
the cluster node's HTTPS relay, which takes whole datagrams of any MTU.

--cleanup undoes whatever a previous daemon recorded (DNS, routes, the
tunnel) and exits: the service runs it after the daemon stops.

Control's answers are trusted only so far: a cluster's subnet and the
device's address must lie inside --allowed-routes (the VPN's pools by
default), and a cluster's DNS domains must be under the cluster's own
domain (<cid>.<aid>.<root>) or under one of --allowed-dns-domains; anything
else is refused, logged and shown in runos vpn status. Only root and the
operator recorded at install may point the daemon at another control.`,
		Example: `  ` + platform.AdminPrefix + `runos vpnd --log-level debug
  ` + platform.AdminPrefix + `runos vpnd --state-dir /tmp/vpnd --socket /tmp/vpnd.sock --interface wg7
  ` + platform.AdminPrefix + `runos vpnd --cleanup`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error { return a.vpnd(cmd.Context(), f) }),
	}
	c.Flags().StringVar(&f.stateDir, "state-dir", "", "the daemon's state directory (device key, prefs) (default $"+platform.EnvStateDir+", else "+platform.DefaultStateDir()+")")
	c.Flags().StringSliceVar(&f.allowedRoutes, "allowed-routes", []string{api.DefaultDevicePool, api.DefaultServicePool},
		"the only prefixes control may route through the tunnel or give the device as its address (control's --device-pool and --service-pool)")
	c.Flags().StringSliceVar(&f.allowedDomains, "allowed-dns-domains", nil,
		"DNS domains control may route through the tunnel besides each cluster's own (e.g. a cluster's custom domain)")
	c.Flags().StringVar(&a.socket, "socket", "", "the local API socket (default $"+platform.EnvSocket+", else "+platform.DefaultSocketPath+")")
	c.Flags().StringVar(&f.caFile, "ca-file", "", "PEM CA that signs control's certificate (default $RUNOS_CA_FILE, else the system roots)")
	c.Flags().StringVar(&f.iface, "interface", "wg1", "the tunnel interface")
	c.Flags().BoolVar(&f.cleanup, "cleanup", false, "undo what a previous daemon changed, then exit")
	c.Flags().BoolVar(&f.longPoll, "long-poll", false, "follow control by long-polls, as daemons before push streams did, instead of one stream")
	c.Flags().IntVar(&f.mtu, "mtu", 0, "the tunnel's MTU, 1280 to 9000 (default: the mtu config key, else 1420)")
	c.Flags().StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	c.Flags().StringVar(&f.logFile, "log-file", "", "append the log to this file (0600) instead of stderr: for service managers that keep no output")
	return c
}

// vpndConfig maps the flags to the daemon's Config.
func (a *app) vpndConfig(f vpndFlags) (vpnd.Config, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.logLevel)); err != nil {
		return vpnd.Config{}, usagef("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	if f.iface == "" {
		return vpnd.Config{}, usagef("--interface must not be empty")
	}
	mtu := f.mtu
	var mtuErr error // the config could not be read: the default, said in the log
	if mtu != 0 {
		if err := config.CheckMTU(mtu); err != nil {
			return vpnd.Config{}, usagef("--mtu: %v", err)
		}
	} else if e, err := a.effective(); err != nil {
		// A service may run with no home and no config at all: the
		// daemon starts with the default rather than not at all.
		mtuErr = err
	} else {
		mtu = e.MTU
	}
	caFile := f.caFile
	if caFile == "" {
		caFile = a.env.Getenv("RUNOS_CA_FILE")
	}
	stateDir := f.stateDir
	if stateDir == "" {
		stateDir = a.env.Getenv(platform.EnvStateDir)
	}
	if stateDir == "" {
		stateDir = platform.DefaultStateDir()
	}
	trust, err := parseTrust(f.allowedRoutes, f.allowedDomains)
	if err != nil {
		return vpnd.Config{}, err
	}
	if len(trust.Routes) == 0 {
		return vpnd.Config{}, usagef("--allowed-routes is empty: name at least the VPN's pools (%s,%s)", api.DefaultDevicePool, api.DefaultServicePool)
	}
	var out io.Writer = a.env.Stderr
	if f.logFile != "" {
		lf, err := os.OpenFile(f.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return vpnd.Config{}, fmt.Errorf("--log-file: %w", err)
		}
		out = lf // open for the process's life: the daemon logs until it exits
	}
	// The last few thousand lines also stay in memory, for runos vpn
	// bugreport (GET /v1/logs), whatever the service does with the output.
	ring := logring.New(logring.DefaultLines)
	log := slog.New(slog.NewTextHandler(io.MultiWriter(ring, out), &slog.HandlerOptions{Level: lvl}))
	if mtuErr != nil {
		log.Warn("the mtu config key was not read; the tunnel's MTU is the default (give --mtu to set it)", "err", mtuErr)
	}
	return vpnd.Config{
		StateDir:  stateDir,
		Socket:    a.socketPath(),
		CAFile:    caFile,
		Interface: f.iface,
		AllowHTTP: a.insecureHTTP,
		Trust:     trust,
		Logger:    log,
		// Split DNS: dnsplit picks the OS's mode (and logs why) against the
		// same state directory, where its changes are recorded for Cleanup.
		DNS: func(iface string, log *slog.Logger) (dnsplit.Configurator, error) {
			return dnsplit.New(dnsplit.Options{Interface: iface, StateDir: stateDir, Logger: log})
		},
		Cleanup:  dnsplit.Cleanup,
		Logs:     ring,
		MTU:      mtu,
		LongPoll: f.longPoll,
		NetMon: func(ignore func(string) bool, log *slog.Logger) (vpnd.NetMonitor, error) {
			return netmon.New(netmon.Options{Ignore: ignore, Log: log})
		},
		RouteMTU: netmon.RouteMTU,
	}, nil
}

func (a *app) vpnd(ctx context.Context, f vpndFlags) error {
	cfg, err := a.vpndConfig(f)
	if err != nil {
		return err
	}
	if f.cleanup {
		if err := a.env.Daemon.Cleanup(ctx, cfg); err != nil {
			return fmt.Errorf("vpnd --cleanup: %w", err)
		}
		return nil
	}
	cfg.Logger.Info("runos vpnd starting", "version", version.String(), "socket", cfg.Socket, "stateDir", cfg.StateDir, "interface", cfg.Interface)
	if err := a.env.Daemon.Run(ctx, cfg); err != nil {
		return fmt.Errorf("vpnd: %w", err)
	}
	return nil
}

// parseTrust checks the daemon's --allowed-routes and --allowed-dns-domains
// (runos vpnd's, and runos vpn install's that it passes on).
func parseTrust(routes, domains []string) (state.Trust, error) {
	trust := state.Trust{Domains: domains}
	for _, s := range routes {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil || p != p.Masked() {
			return state.Trust{}, usagef("--allowed-routes %q: want prefixes such as %s", s, api.DefaultServicePool)
		}
		trust.Routes = append(trust.Routes, p)
	}
	for _, d := range domains {
		if !strings.Contains(strings.Trim(d, "."), ".") {
			return state.Trust{}, usagef("--allowed-dns-domains %q: want a domain of two labels or more, such as example.org", d)
		}
	}
	return trust, nil
}
