//go:build !windows

// Package labcmd is the runos-lab command tree (cobra): up, down, exec,
// status, demo, and the hidden helpers the lab itself runs (webapp,
// browser, idp).
package labcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/internal/version"
	"github.com/runos/vpn/lab"
)

// DefaultDir is where a lab lives when --dir is not given (and
// $RUNOS_LAB_DIR is not set: exec sets it inside the lab).
const DefaultDir = "/tmp/runos-lab"

// exitError carries a command's exit code (exec passes its command's on).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Main runs runos-lab with args and returns the process's exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := New(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintln(stderr, "runos-lab:", err)
		return 1
	}
}

func defaultDir() string {
	if d := os.Getenv("RUNOS_LAB_DIR"); d != "" {
		return d
	}
	return DefaultDir
}

// New returns the command tree.
func New(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "runos-lab",
		Short: "A whole RunOS world in network namespaces on this machine",
		Long: `runos-lab builds a whole RunOS world in Linux network namespaces: control
(https://198.51.100.10), cluster ky3 (nodes n1, n2) and cluster xym (node n1) of
account rjwrn, each node running runos-gateway and a web app on port 80, a LAN
with its resolver (dnsmasq), and laptops running the RunOS daemon.

Hosts: control, lan, idp (the OpenID Connect provider control signs users in
through, https://198.51.100.7), ky3-n1, ky3-n2, xym-n1, client (client2… with
--clients).
Every node's gateway also serves the relay (WireGuard over HTTPS) on its 443.
block, unblock, uplink and mtu change a laptop's network (nftables and
iproute2 inside the lab's namespaces only).
It needs root and Debian's iproute2, util-linux, dnsmasq-base, wireguard-tools
(and nftables for block and uplink).`,
		Example: `  sudo runos-lab up --dir /tmp/lab
  sudo runos-lab exec --dir /tmp/lab client -- runos vpn up --cid ky3
  sudo runos-lab exec --dir /tmp/lab client -- wg show wg1
  sudo runos-lab down --dir /tmp/lab
  sudo runos-lab demo`,
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(upCmd(), downCmd(), execCmd(), statusCmd(), demoCmd(), webappCmd(), browserCmd(), kubeDNSCmd(), kubeAPICmd(), idpCmd())
	root.AddCommand(netCmds()...)
	return root
}

func logger(w io.Writer, verbose bool) *slog.Logger {
	if !verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

func upCmd() *cobra.Command {
	var (
		dir      string
		clients  int
		ttl      time.Duration
		bin      string
		verbose  bool
		skip     []string
		store    string
		reps     int
		noUDP    bool
		record   bool
		metrics  bool
		longPoll bool
	)
	c := &cobra.Command{
		Use:   "up",
		Short: "Build the lab and start everything in it",
		Long: `up builds the lab's namespaces, links and mounts, makes its CA and control's
certificate, writes the world file (random password and tokens), starts control,
a gateway and a web app on every node, the LAN resolver, and the daemon on every
laptop, and returns when all of them answer. With --store postgres control keeps
its data in PostgreSQL on host db (data in DIR/hosts/db); with
--control-replicas N, N runos-control replicas run on hosts control-1…control-N
behind HAProxy on host control, at control's address. It writes DIR/env.json (addresses,
credentials, sockets) for scripts and tests. If anything fails, what was made is
removed again.`,
		Example: `  sudo runos-lab up --dir /tmp/lab
  sudo runos-lab up --dir /tmp/lab --clients 3 --session-ttl 2m
  sudo runos-lab up --dir /tmp/lab --store postgres --control-replicas 3
  sudo runos-lab up --dir /tmp/lab --metrics`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if clients < 1 || clients > lab.MaxClients {
				return fmt.Errorf("--clients %d: want 1 to %d laptops", clients, lab.MaxClients)
			}
			l, err := lab.Up(cmd.Context(), lab.Options{Dir: dir, Clients: clients, SessionTTL: ttl,
				BinDir: bin, Skip: skip, Metrics: metrics, Progress: cmd.OutOrStdout(), Logger: logger(cmd.ErrOrStderr(), verbose),
				Store: store, ControlReplicas: reps, BlockUDP: noUDP, RecordRelay: record, LongPoll: longPoll})
			if err != nil {
				return err
			}
			printUsage(cmd.OutOrStdout(), l.Env())
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultDir(), "the lab's directory (created; must be empty)")
	c.Flags().IntVar(&clients, "clients", 1, fmt.Sprintf("number of laptops: client, client2 … (1 to %d)", lab.MaxClients))
	c.Flags().DurationVar(&ttl, "session-ttl", 0, "how long a sign-in lasts (control's --session-ttl; 0: control's default, 24h)")
	c.Flags().StringVar(&bin, "bin", "", "directory with runos, runos-control, runos-gateway, runos-lab (default: this program's)")
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "log every step to stderr")
	c.Flags().StringVar(&store, "store", lab.StoreSQLite, "control's store: sqlite (one file) or postgres (Debian's PostgreSQL on host db)")
	c.Flags().IntVar(&reps, "control-replicas", 1, fmt.Sprintf("runos-control replicas (1 to %d) behind HAProxy at control's address, on hosts control-1…; more than one needs --store postgres", lab.MaxReplicas))
	c.Flags().BoolVar(&metrics, "metrics", false, "control and the gateways serve Prometheus metrics, scraped by Debian's prometheus on the control host (its URL in runos-lab status)")
	c.Flags().BoolVar(&longPoll, "long-poll", false, "the daemons and gateways follow control by long-polls, as those before push streams did")
	c.Flags().StringSliceVar(&skip, "skip", nil, "programs not to start (tests of the lab itself)")
	_ = c.Flags().MarkHidden("skip")
	c.Flags().BoolVar(&noUDP, "block-udp", false, "start every laptop behind a network that lets no UDP through to the nodes (runos-lab block … udp)")
	c.Flags().BoolVar(&record, "record-relay", false, "gateways record their relay streams' bytes in DIR/hosts/<node>/relay-record")
	return c
}

func printUsage(w io.Writer, e *lab.Env) {
	if e.PrometheusURL != "" {
		fmt.Fprintf(w, "\nPrometheus: %s (inside the lab: runos-lab exec --dir %s control -- curl -s '%s/api/v1/query?query=runos_control_moves_total')\n",
			e.PrometheusURL, e.Dir, e.PrometheusURL)
	}
	fmt.Fprintf(w, `
The lab is up. Control: %s (CA %s). User %s.
Try:
  runos-lab exec --dir %[4]s client -- runos vpn up --cid %[5]s
  runos-lab exec --dir %[4]s client -- runos vpn status
  runos-lab exec --dir %[4]s client -- wg show wg1
  runos-lab exec --dir %[4]s ky3-n1 -- wg show
Remove it with:
  runos-lab down --dir %[4]s
`, e.APIURL, e.CAFile, e.User, e.Dir, e.DefaultCID)
	if e.OIDC != nil && len(e.Users) > 1 {
		u := e.Users[1]
		fmt.Fprintf(w, `Identity provider: %s (its users and groups in %s/env.json). Sign in as one:
  runos-lab exec --dir %s client -- env %s=%s runos vpn up --cid %s
`, e.OIDC.Issuer, e.Dir, e.Dir, lab.BrowserUserEnv, u.Email, e.DefaultCID)
	}
}

func downCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "down",
		Short: "Remove the lab: processes, mounts, namespaces, files",
		Long: `down stops the lab's processes (by the PIDs recorded in DIR/lab.json, then
anything still running in its namespaces), unmounts its mounts, deletes its
namespaces (and with them every link) and removes its files. It also cleans up
after an up that died halfway, and is safe to run twice.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return lab.Down(cmd.Context(), dir, lab.DownOptions{Progress: cmd.OutOrStdout()})
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultDir(), "the lab's directory")
	return c
}

func execCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "exec HOST -- CMD [ARGS...]",
		Short: "Run a command on a lab host",
		Long: `exec runs CMD inside HOST's network and mount namespaces (its own
/etc/resolv.conf, /run/wireguard and /run/runos), with the environment set:
PATH with the project's programs first, RUNOS_API_URL, RUNOS_CA_FILE,
RUNOS_VPND_SOCKET, RUNOS_CONFIG, HOME, and on laptops BROWSER (the lab's
scripted browser, which signs in through the real login page).

HOST is control, lan, client (client2…), <cid>-<nid> such as ky3-n1, and with
replicas control-1… and db.
The exit code is the command's.`,
		Example: `  runos-lab exec client -- runos vpn up --cid ky3
  runos-lab exec client -- wg show wg1
  runos-lab exec ky3-n1 -- wg show wgvpn
  runos-lab exec client -- curl -s http://100.100.1.1/`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return errors.New("usage: runos-lab exec [--dir D] HOST -- CMD [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Open(dir)
			if err != nil {
				return err
			}
			c, err := l.Command(cmd.Context(), args[0], nil, args[1:]...)
			if err != nil {
				return err
			}
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			err = c.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return exitError{ee.ExitCode()}
			}
			return err
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultDir(), "the lab's directory")
	return c
}
