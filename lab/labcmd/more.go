//go:build !windows

package labcmd

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/internal/relaywire"
	"github.com/runos/vpn/lab"
)

func statusCmd() *cobra.Command {
	var (
		dir     string
		jsonOut bool
	)
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the lab's hosts, processes and laptops",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := lab.Open(dir)
			if err != nil {
				return err
			}
			st := l.Inspect(cmd.Context())
			out := cmd.OutOrStdout()
			if jsonOut {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			fmt.Fprintf(out, "lab %s in %s (ready: %v), control %s\n", st.Prefix, st.Dir, st.Ready, st.APIURL)
			if st.PrometheusURL != "" {
				fmt.Fprintf(out, "prometheus %s (scraping control and every gateway; reach it inside the lab: runos-lab exec --dir %s control -- curl %s/api/v1/targets)\n",
					st.PrometheusURL, st.Dir, st.PrometheusURL)
			}
			fmt.Fprintln(out)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "HOST\tNETNS\tADDRESSES\tPROCESSES")
			for _, h := range st.Hosts {
				var addrs, procs []string
				for seg, a := range h.Addresses {
					addrs = append(addrs, seg+"="+a)
				}
				sort.Strings(addrs)
				for _, p := range h.Processes {
					state := "running"
					if !p.Alive {
						state = "DEAD"
					}
					procs = append(procs, fmt.Sprintf("%s[%d] %s", p.Name, p.PID, state))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", h.Name, h.Netns, strings.Join(addrs, " "), strings.Join(procs, ", "))
			}
			tw.Flush()
			fmt.Fprintln(out)
			printControl(out, st.Control)
			for _, lp := range st.Laptops {
				if lp.Error != "" {
					fmt.Fprintf(out, "%s: daemon: %s\n", lp.Host, lp.Error)
					continue
				}
				s := lp.Status
				fmt.Fprintf(out, "%s: session %s %s", lp.Host, s.Session.State, s.Session.User)
				for _, c := range s.Clusters {
					fmt.Fprintf(out, "; %s %s peerUp=%v", c.CID, c.State, c.PeerUp)
				}
				fmt.Fprintln(out)
			}
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultDir(), "the lab's directory")
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return c
}

func demoCmd() *cobra.Command {
	var (
		keep bool
		bin  string
	)
	c := &cobra.Command{
		Use:   "demo",
		Short: "Bring a lab up and walk through RunOS VPN in it",
		Long: `demo needs no input: it brings a lab up in a temporary directory, then runs,
on the laptop, what a user would type — sign-in through the login page (the
lab's scripted browser), runos vpn up, runos vpn status with the live handshake,
a page on ky3's node fetched through the tunnel, runos vpn connect xym, a move of
ky3's VPN server from n1 to n2, runos vpn disconnect xym and runos vpn down —
each command shown with its real output. Then it removes the lab, unless --keep.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return lab.Demo(cmd.Context(), lab.DemoOptions{Keep: keep, BinDir: bin, Out: cmd.OutOrStdout()})
		},
	}
	c.Flags().BoolVar(&keep, "keep", false, "leave the lab running at the end and print how to use and remove it")
	c.Flags().StringVar(&bin, "bin", "", "directory with the project's programs (default: this program's)")
	return c
}

func webappCmd() *cobra.Command {
	var cid, nid, listen, tlsListen, domain, relayUp, relayCert, relayKey string
	c := &cobra.Command{
		Use:    "webapp",
		Short:  "The web app on port 80 of every lab node (stands in for Traefik)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "webapp: cluster=%s node=%s on %s\n", cid, nid, ln.Addr())
			srv := &http.Server{Handler: lab.WithRelay(lab.WebApp(cid, nid), relayUp, relaywire.Path), ReadHeaderTimeout: 10 * time.Second}
			go func() { <-cmd.Context().Done(); srv.Close() }()
			if tlsListen != "" {
				// HTTPS as Traefik serves it on 443, with a certificate of
				// its own (as Traefik's default one is before cert-manager's).
				var rc *tls.Certificate
				if relayCert != "" {
					c, err := tls.LoadX509KeyPair(relayCert, relayKey)
					if err != nil {
						return fmt.Errorf("--relay-cert: %w", err)
					}
					rc = &c
				}
				tln, err := lab.WebAppTLSListener(tlsListen, cid, domain, rc)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "webapp: HTTPS on %s\n", tln.Addr())
				go func() { _ = srv.Serve(tln) }()
			}
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	c.Flags().StringVar(&cid, "cluster", "", "the node's cluster (cid)")
	c.Flags().StringVar(&nid, "node", "", "the node (nid)")
	c.Flags().StringVar(&listen, "listen", ":80", "address to listen on")
	c.Flags().StringVar(&tlsListen, "tls-listen", "", "also serve HTTPS (a self-signed certificate) on this address")
	c.Flags().StringVar(&domain, "domain", "", "the cluster's domain, named in the HTTPS certificate")
	c.Flags().StringVar(&relayUp, "relay-upstream", "", "route the relay's path ("+relaywire.Path+") to the gateway's relay at this address, as Traefik does")
	c.Flags().StringVar(&relayCert, "relay-cert", "", "the certificate HTTPS presents to clients that name no server (devices dialling the node's address)")
	c.Flags().StringVar(&relayKey, "relay-key", "", "the private key of --relay-cert")
	_ = c.MarkFlagRequired("cluster")
	_ = c.MarkFlagRequired("node")
	return c
}

func browserCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:    "browser URL",
		Short:  "The lab's scripted browser: signs in as the lab's user through the login page",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := lab.LoadEnv(dir)
			if err != nil {
				return err
			}
			return lab.Browse(cmd.Context(), env, os.Getenv("RUNOS_LAB_HOST"), os.Getenv(lab.BrowserUserEnv), args[0], cmd.ErrOrStderr())
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultDir(), "the lab's directory")
	return c
}

// printControl shows control's store, each replica, the database and the
// balancer.
func printControl(out io.Writer, c *lab.ControlStatus) {
	if c == nil {
		return
	}
	ready := func(ok bool, why string) string {
		if ok {
			return "ready"
		}
		return "NOT READY: " + why
	}
	fmt.Fprintf(out, "control: store %s, %d replica(s)\n", c.Store, len(c.Replicas))
	for _, r := range c.Replicas {
		fmt.Fprintf(out, "  %s %s: %s\n", r.Host, r.URL, ready(r.Ready, r.Error))
	}
	if c.Database != nil {
		fmt.Fprintf(out, "  database on %s: %s\n", c.Database.Host, ready(c.Database.Ready, c.Database.Error))
	}
	if b := c.Balancer; b != nil {
		var ss []string
		for name, state := range b.Servers {
			ss = append(ss, name+"="+state)
		}
		sort.Strings(ss)
		fmt.Fprintf(out, "  balancer (HAProxy on control) %s: %s", b.URL, strings.Join(ss, " "))
		if b.Error != "" {
			fmt.Fprintf(out, " (%s)", b.Error)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
}
