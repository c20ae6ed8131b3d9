// Command runos-control is RunOS VPN's server side: accounts, clusters,
// nodes, devices, sessions, VPN services and their moves, over HTTPS/JSON,
// with the OAuth 2.0 sign-in. See control/README.md.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control"
	"github.com/runos/vpn/internal/version"
)

func main() {
	if err := command().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "runos-control:", err)
		os.Exit(1)
	}
}

func command() *cobra.Command {
	var (
		cfg         control.Config
		devicePool  string
		servicePool string
		logLevel    string
		proxies     []string
	)
	cmd := &cobra.Command{
		Use:   "runos-control (--store URL | --db PATH) (--tls-cert F --tls-key F | --insecure-http) [flags]",
		Short: "RunOS VPN's control server",
		Long: `runos-control is the server side of RunOS VPN. It signs users in (OAuth 2.0 with
PKCE and the device grant), registers devices by public key, hands out tunnel
addresses, decides which node serves each cluster's WireGuard VPN, enforces the
operator rules, and pushes every change to devices and gateways over long-polls.

State lives in a store (--store, or RUNOS_STORE): sqlite:PATH, one SQLite
file and one runos-control (the default; --db PATH is the same), or
postgres://user:password@host:port/database, which several runos-control
replicas share behind a load balancer: changes reach every replica's
long-polls (LISTEN/NOTIFY), timers are acted on by one replica at a time,
and sign-in secrets and slow-downs are in the database. The password in the
URL is never logged. A load balancer checks GET /readyz (and /healthz).

A world file (--seed, JSON: accounts, users, clusters, nodes, VPN services,
tokens) is imported at start; importing it again changes nothing that
already exists.

It serves HTTPS with --tls-cert and --tls-key; plain HTTP only with
--insecure-http. SIGTERM or SIGINT shut it down gracefully.`,
		Example: `  runos-control --db /var/lib/runos-control/control.db --seed world.json \
    --tls-cert control.crt --tls-key control.key --listen 198.51.100.10:443

  RUNOS_STORE=postgres://runos:secret@db:5432/runos runos-control --replica-name control-2 \
    --trusted-proxy 198.51.100.10/32 --issuer https://198.51.100.10 \
    --tls-cert control.crt --tls-key control.key --listen 198.51.100.12:443`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.String(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.DevicePool, err = netip.ParsePrefix(devicePool); err != nil {
				return fmt.Errorf("--device-pool %q: want a prefix such as 100.96.0.0/16", devicePool)
			}
			if cfg.ServicePool, err = netip.ParsePrefix(servicePool); err != nil {
				return fmt.Errorf("--service-pool %q: want a prefix such as 100.100.0.0/16", servicePool)
			}
			for _, p := range proxies {
				pfx, err := netip.ParsePrefix(p)
				if err != nil {
					a, aerr := netip.ParseAddr(p)
					if aerr != nil {
						return fmt.Errorf("--trusted-proxy %q: want an address or a prefix such as 198.51.100.10/32", p)
					}
					pfx = netip.PrefixFrom(a, a.BitLen())
				}
				cfg.TrustedProxies = append(cfg.TrustedProxies, pfx)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			for _, d := range []struct {
				name string
				v    time.Duration
			}{{"--session-ttl", cfg.SessionTTL}, {"--move-ready-timeout", cfg.MoveReadyTimeout},
				{"--move-deadline", cfg.MoveDeadline}, {"--heartbeat-timeout", cfg.HeartbeatTimeout},
				{"--device-idle-ttl", cfg.DeviceIdleTTL}} {
				if d.v <= 0 {
					return fmt.Errorf("%s %s: want a positive duration such as 30s", d.name, d.v)
				}
			}
			if cfg.MaxDevicesPerUser < 1 {
				return fmt.Errorf("--max-devices-per-user %d: want at least 1", cfg.MaxDevicesPerUser)
			}
			if err := cfg.Check(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return control.Run(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", ":443", "address to serve on (host:port)")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate (chain) for HTTPS")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	f.BoolVar(&cfg.InsecureHTTP, "insecure-http", false, "serve plain HTTP instead of HTTPS (tests and local labs only)")
	f.StringVar(&cfg.DB, "db", "", "SQLite database file (created, and migrated, as needed): --store sqlite:PATH")
	f.StringVar(&cfg.Store, "store", os.Getenv("RUNOS_STORE"), "where the data lives: sqlite:PATH or postgres://user:password@host:port/database (default $RUNOS_STORE)")
	f.StringVar(&cfg.ReplicaName, "replica-name", "", "this replica's name, in its logs, its database connections and a RunOS-Replica header on every answer")
	f.StringSliceVar(&proxies, "trusted-proxy", nil, "a load balancer's address or prefix whose X-Forwarded-For gives the client's address (repeatable)")
	f.StringVar(&cfg.Seed, "seed", "", "world file to import at start (api.World JSON; idempotent)")
	f.DurationVar(&cfg.SessionTTL, "session-ttl", 24*time.Hour, "how long a sign-in lasts; its devices leave every gateway the instant it lapses")
	f.StringVar(&devicePool, "device-pool", api.DefaultDevicePool, "pool of device tunnel addresses (one per device)")
	f.StringVar(&servicePool, "service-pool", api.DefaultServicePool, "pool of cluster VPN subnets (one /24 per cluster's service)")
	f.StringVar(&cfg.Issuer, "issuer", "", "control's public URL, used in OAuth metadata and device-code links (default: derived from --listen)")
	f.DurationVar(&cfg.MoveReadyTimeout, "move-ready-timeout", 15*time.Second, "a move fails (changing nothing for devices) if the target gateway is not listening within this")
	f.DurationVar(&cfg.MoveDeadline, "move-deadline", 30*time.Second, "after the switch, a move is done when every device handshaked with the new node or this passed")
	f.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", 30*time.Second, "a node is no_heartbeat this long after its gateway's last report")
	f.IntVar(&cfg.MaxDevicesPerUser, "max-devices-per-user", 20, "how many devices one user may register (revoked ones count until deleted); the next is refused, naming the limit")
	f.DurationVar(&cfg.DeviceIdleTTL, "device-idle-ttl", 30*24*time.Hour, "a device with no live session and no handshake this long is deleted and its address reused")
	f.DurationVar(&cfg.StreamHeartbeat, "stream-heartbeat", api.DefaultHeartbeat, "a push stream quiet this long gets a heartbeat (keep it under the idle timeout of any proxy in front of control)")
	f.BoolVar(&cfg.NoStreams, "no-streams", false, "answer push-stream requests as long-polls, as controls before streams did (for a proxy that buffers answers); clients fall back and warn")
	f.DurationVar(&cfg.BodyTimeout, "body-timeout", 10*time.Second, "a request's body must arrive whole within this of its headers, else its connection is cut (long-polls and streams carry none)")
	f.IntVar(&cfg.MaxConnsPerAddr, "max-conns-per-addr", 512, "connections one client address may hold at once; past it new ones are closed at once (-1: no cap). --trusted-proxy addresses are exempt: limit clients at the balancer")
	f.IntVar(&cfg.MaxHeldPerToken, "max-streams-per-token", 100, "push streams and long-polls one token may hold at once; the next is answered 429")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics, unauthenticated: choose an address only your monitoring reaches (default: off)")
	cfg.OIDC.AddFlags(f)
	f.DurationVar(&cfg.OIDCCheckEvery, "oidc-check-interval", 15*time.Minute, "how often control asks the provider about each user signed in through it (refresh token): one it no longer accepts loses their sessions")
	f.StringVar(&cfg.OIDCAccount, "oidc-account", "", "the account (AID) users signed in through --oidc-issuer belong to: created there at their first sign-in")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}
