// Command runos-gateway is the node agent: it runs on every node of a
// cluster, follows control for its node and, on the node hosting the
// cluster's user VPN, runs the WireGuard server and the cluster DNS. See
// `runos-gateway --help` and package gateway.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/gateway"
	"github.com/runos/vpn/gateway/metrics"
	"github.com/runos/vpn/gateway/nodekey"
	"github.com/runos/vpn/gateway/reach"
	"github.com/runos/vpn/gateway/relay"
	"github.com/runos/vpn/internal/secretfile"
	"github.com/runos/vpn/internal/version"
	"golang.zx2c4.com/wireguard/conn"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // could not run (or stopped on an error retrying cannot fix)
	exitUsage = 2 // bad flags
)

// maxHeartbeat: control marks a node no_heartbeat 30 s after its last one.
const maxHeartbeat = 30 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type flags struct {
	control, nodeID, tokenFile, stateDir, caFile, iface string
	heartbeat                                           time.Duration
	logLevel, logFormat                                 string
	relayListen, relayCert, relayKey, relayRecord       string
	insecureHTTP, longPoll                              bool
	metricsAddr                                         string
	inside                                              api.ClusterInside
}

type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// run is main without the process: flags in, exit code out.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var f flags
	cmd := &cobra.Command{
		Use:   "runos-gateway --control URL --node-id NID --token-file F --state-dir D",
		Short: "The RunOS node agent: the cluster's WireGuard VPN server and cluster DNS",
		Long: `runos-gateway runs on every node of a cluster. It holds a push stream open
to control (outbound only: the node needs no inbound port but the VPN's UDP
port; --long-poll long-polls instead, as gateways before streams did) and
does what control's map for this node says:

  - nothing, on a node that does not host the cluster's VPN server;
  - on the node that does (role active), or the target of a move (standby),
    or the old node of a move (draining): a WireGuard interface (--interface)
    listening on the service's UDP port (32768 by default) with one peer per
    connected device, the VPN server's address, a route to the device pool,
    and the cluster DNS on that address, port 53, answering the cluster's
    names with the server's address and refusing every other name.

Peers come and go, and roles change, without restarting the interface.

The node's WireGuard key is generated here on first start and kept in
--state-dir as gateway.key (0600); it is never sent anywhere or logged. Only
the public key is reported, with whether the server listens and each
device's latest handshake, on every change and every --heartbeat.

With --relay-listen, the node also serves the relay: WireGuard over HTTPS
(a WebSocket on the relay path, /runos-vpn/relay) for devices on networks that
let no UDP through. The node's ingress (Traefik, on 443) routes that path here,
terminating TLS: then --relay-listen is a loopback address and plain HTTP (the
device's address comes from X-Forwarded-For). With --relay-cert and
--relay-key the gateway speaks TLS itself, on any address. A device is let in
when control confirms its session and key and that it joined this cluster;
its datagrams go into the same WireGuard server as UDP ones, ciphertext only.

Control's certificate is verified against --ca-file (default $RUNOS_CA_FILE,
else the system roots); --control must be https:// (plain HTTP only with
--insecure-http, for tests). The token file holds the node's enrollment
token and must be readable by its owner only (chmod 600): any other mode
is refused.

SIGTERM or SIGINT stops serving: the interface, its address and route, and
the DNS listener are removed before the process exits.`,
		Example: `  runos-gateway --control https://198.51.100.10 --node-id n1 \
    --token-file /etc/runos/gateway.token --state-dir /var/lib/runos-gateway
  runos-gateway --control https://control.example.com --node-id n2 \
    --token-file tok --state-dir /tmp/gw --interface wgvpn2 --log-level debug`,
		Version: version.String(),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q: runos-gateway takes flags only", args[0])
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), f, getenv, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.control, "control", "", "control's URL, e.g. https://198.51.100.10 (required)")
	fl.StringVar(&f.nodeID, "node-id", "", "this node's id, e.g. n1 (required)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the node's enrollment token (required)")
	fl.StringVar(&f.stateDir, "state-dir", "", "state directory, 0700: holds gateway.key (required)")
	fl.StringVar(&f.caFile, "ca-file", "", "PEM CA that signs control's certificate (default $RUNOS_CA_FILE, else the system roots)")
	fl.StringVar(&f.iface, "interface", gateway.DefaultInterface, "the WireGuard interface to create when serving")
	fl.DurationVar(&f.heartbeat, "heartbeat", gateway.DefaultHeartbeat, "report at least this often (under 30s: control marks a node no_heartbeat 30 s after its last report)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "text, or json for log collectors")
	fl.StringVar(&f.relayListen, "relay-listen", "", "serve the relay (WireGuard over HTTPS) on this address, e.g. :443 (default: no relay)")
	fl.StringVar(&f.relayCert, "relay-cert", "", "PEM certificate the relay presents (with --relay-listen)")
	fl.StringVar(&f.relayKey, "relay-key", "", "PEM private key of --relay-cert")
	fl.StringVar(&f.relayRecord, "relay-record", "", "")
	_ = fl.MarkHidden("relay-record") // tests: record every relay stream's bytes in this directory
	fl.BoolVar(&f.insecureHTTP, api.FlagInsecureHTTP, false, "allow an http:// --control (tests only: the enrollment token would travel in clear text)")
	fl.BoolVar(&f.longPoll, "long-poll", false, "follow control by long-polls, as gateways before push streams did, instead of one stream")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics, unauthenticated: choose an address only your monitoring reaches (default: off)")
	fl.StringVar(&f.inside.NodeNetwork, "node-network", "", "the cluster's internal node network, e.g. 10.10.0.0/24: devices reach it through the VPN node (default: none)")
	fl.StringVar(&f.inside.PodRange, "pod-range", "", "the cluster's pod range, e.g. 10.244.0.0/16 (default: none)")
	fl.StringVar(&f.inside.ServiceRange, "service-range", "", "the cluster's Service range, e.g. 10.96.0.0/12 (default: none)")
	fl.StringVar(&f.inside.DNSServer, "cluster-dns", "", "kube-dns' address, e.g. 10.96.0.10: the cluster DNS asks it for Service names (default: none)")
	fl.StringVar(&f.inside.APIAddress, "api-vip", "", "the control-plane VIP where the Kubernetes API listens on 6443: k8s.<cid>… answers it (default: none)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	cmd.SetVersionTemplate("runos-gateway {{.Version}}\n")
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetContext(ctx)
	err := cmd.Execute()
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "runos-gateway: %v\nSee runos-gateway --help.\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "runos-gateway: %v\n", err)
		return exitError
	}
}

// check checks the flags, touching nothing, and returns the CA file to use.
func (f flags) check(getenv func(string) string) (caFile string, err error) {
	var missing []string
	for _, r := range []struct{ name, v string }{
		{"--control", f.control}, {"--node-id", f.nodeID}, {"--token-file", f.tokenFile}, {"--state-dir", f.stateDir},
	} {
		if r.v == "" {
			missing = append(missing, r.name)
		}
	}
	if len(missing) > 0 {
		return "", usagef("missing %s", strings.Join(missing, ", "))
	}
	if _, err := api.ParseControlURL(f.control, f.insecureHTTP); err != nil {
		return "", usagef("--control: %v", err)
	}
	if err := checkIfname(f.iface); err != nil {
		return "", usagef("--interface %q: %v", f.iface, err)
	}
	if f.heartbeat <= 0 || f.heartbeat >= maxHeartbeat {
		return "", usagef("--heartbeat %s: want more than 0 and less than %s (control marks a node no_heartbeat %s after its last report)", f.heartbeat, maxHeartbeat, maxHeartbeat)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.logLevel)); err != nil {
		return "", usagef("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	if f.logFormat != "text" && f.logFormat != "json" {
		return "", usagef("--log-format %q: want text or json", f.logFormat)
	}
	if (f.relayCert == "") != (f.relayKey == "") || f.relayListen == "" && f.relayCert != "" {
		return "", usagef("--relay-cert and --relay-key go together, with --relay-listen")
	}
	if f.relayListen != "" && f.relayCert == "" {
		if h, _, err := net.SplitHostPort(f.relayListen); err != nil || !isLoopback(h) {
			return "", usagef("--relay-listen %s: plain HTTP only on a loopback address (behind the node's ingress); elsewhere give --relay-cert and --relay-key", f.relayListen)
		}
	}
	if err := f.inside.Check(); err != nil {
		return "", usagef("what lies inside the cluster (--node-network, --pod-range, --service-range, --cluster-dns, --api-vip): %v", err)
	}
	if f.caFile != "" {
		return f.caFile, nil
	}
	return getenv("RUNOS_CA_FILE"), nil
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serve(ctx context.Context, f flags, getenv func(string) string, stderr io.Writer) error {
	caFile, err := f.check(getenv)
	if err != nil {
		return err
	}
	log := newLogger(stderr, f.logLevel, f.logFormat)
	token, err := readToken(f.tokenFile)
	if err != nil {
		return err
	}
	client, err := api.NewClient(f.control, token, caFile, api.AllowHTTP(f.insecureHTTP))
	if err != nil {
		return usagef("--control: %v", err)
	}
	key, created, err := nodekey.LoadOrCreate(f.stateDir, log)
	if err != nil {
		return err
	}
	if created {
		log.Info("generated the node key", "path", f.stateDir+"/"+nodekey.FileName, "publicKey", key.PublicKey().String())
	}
	log.Info("runos-gateway starting", "version", version.String(), "node", f.nodeID, "control", f.control,
		"interface", f.iface, "heartbeat", f.heartbeat.String(), "publicKey", key.PublicKey().String())
	fwd := reach.New(reach.LinuxOS{}, log)
	var mets gateway.Metrics
	if f.metricsAddr != "" {
		m := metrics.New(time.Now)
		m.ReachDropped(fwd.Dropped)
		stop, err := serveMetrics(f.metricsAddr, m, log)
		if err != nil {
			return err
		}
		defer stop()
		mets = m
	}
	var bind *relay.Bind
	if f.relayListen != "" {
		bind = relay.NewBind(conn.NewDefaultBind(), log)
		stop, err := serveRelay(ctx, f, bind, client, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	err = gateway.Run(ctx, gateway.Config{
		Relay:     bind,
		Metrics:   mets,
		Control:   client,
		NodeID:    f.nodeID,
		Key:       key,
		Interface: f.iface,
		Heartbeat: f.heartbeat,
		LongPoll:  f.longPoll,
		Version:   version.Version,
		Logger:    log,
		PublicIP:  gateway.DetectPublicIP(f.control),
		Inside:    f.inside,
		Reach:     fwd,
		StateDir:  f.stateDir,
	})
	if err != nil {
		return err
	}
	log.Info("runos-gateway stopped")
	return nil
}

// serveMetrics serves /metrics on addr until stop.
func serveMetrics(addr string, m *metrics.Gateway, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("metrics serving", "addr", ln.Addr().String(), "path", "/metrics")
	return func() { _ = srv.Close() }, nil
}

// readToken reads the enrollment token, refusing a file others may read.
func readToken(path string) (string, error) {
	b, err := secretfile.Read(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("--token-file %s: want the node's enrollment token alone on one line", path)
	}
	return tok, nil
}

// checkIfname applies Linux's interface name rules (IFNAMSIZ).
func checkIfname(s string) error {
	if s == "" || len(s) > 15 {
		return errors.New("an interface name is 1 to 15 characters")
	}
	for _, r := range s {
		if r <= ' ' || r == '/' || r == ':' || r > '~' {
			return errors.New("an interface name has no spaces, slashes or colons")
		}
	}
	return nil
}

// isLoopback reports whether host (from --relay-listen) is a loopback
// address or name.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
