//go:build !windows

package labcmd

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/lab"
)

// netCmds are the commands that change a laptop's network: what gets
// through (block, unblock), which segment it is on (uplink) and the path's
// MTU (mtu). All of them act inside the lab's namespaces only.
func netCmds() []*cobra.Command {
	return []*cobra.Command{blockCmd(), unblockCmd(), uplinkCmd(), mtuCmd(), portalCmd()}
}

func blockCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "block HOST udp|captive",
		Short: "Hold back UDP (or everything but a captive portal) on a laptop's network",
		Long: `block adds nftables rules inside a laptop's network namespace (nothing outside
the lab is touched):

  udp      no UDP to or from any node: WireGuard's UDP never gets through, TCP 443
           does (a hotel or corporate network); the daemon falls back to the
           cluster node's HTTPS relay.
  captive  a captive portal: no UDP and no HTTPS to the nodes, and plain HTTP to
           anywhere redirected to the portal's sign-in page (the lab runs the
           portal on the lan host); status says the network needs a sign-in page.

A second block replaces the first; unblock removes it.`,
		Example: `  runos-lab block --dir /tmp/lab client udp
  runos-lab block --dir /tmp/lab client captive
  runos-lab unblock --dir /tmp/lab client`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Open(dir)
			if err != nil {
				return err
			}
			if err := l.Block(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s blocked\n", args[0], args[1])
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultDir(), "the lab's directory")
	return c
}

func unblockCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "unblock HOST",
		Short: "Remove what block added on a laptop's network",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Open(dir)
			if err != nil {
				return err
			}
			if err := l.Unblock(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: unblocked\n", args[0])
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultDir(), "the lab's directory")
	return c
}

func uplinkCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "uplink HOST lan|wan|both",
		Short: "Move a laptop to one segment (a new network: address, default route, resolver)",
		Long: `uplink moves a laptop as a user moving from the office LAN to a phone's hotspot
would: the other segment's link goes down and loses its address, the default
route goes through the new segment's router (the lan host, which NATs the LAN
onto the WAN), and resolv.conf is rewritten as a DHCP client would. "both" puts
the laptop back on both segments with no default route, as the lab starts.`,
		Example: `  runos-lab uplink --dir /tmp/lab client lan
  runos-lab uplink --dir /tmp/lab client wan`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Open(dir)
			if err != nil {
				return err
			}
			if err := l.Uplink(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: on %s\n", args[0], args[1])
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultDir(), "the lab's directory")
	return c
}

func mtuCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:     "mtu HOST BYTES",
		Short:   "Set the MTU of a host's links (a smaller path under the tunnel)",
		Example: `  runos-lab mtu --dir /tmp/lab client 1280`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return fmt.Errorf("mtu %q: want a number of bytes", args[1])
			}
			l, err := lab.Open(dir)
			if err != nil {
				return err
			}
			if err := l.SetMTU(cmd.Context(), args[0], n); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: mtu %d\n", args[0], n)
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultDir(), "the lab's directory")
	return c
}

func portalCmd() *cobra.Command {
	var listen, redirect string
	c := &cobra.Command{
		Use:    "portal",
		Short:  "The lab's captive portal: every plain HTTP request is redirected to its sign-in page",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "portal: on %s, redirecting to %s\n", ln.Addr(), redirect)
			srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, redirect+"?from="+r.Host, http.StatusFound)
			})}
			go func() { <-cmd.Context().Done(); srv.Close() }()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	c.Flags().StringVar(&listen, "listen", lab.PortalListen, "address to listen on")
	c.Flags().StringVar(&redirect, "redirect", lab.PortalURL, "the sign-in page")
	return c
}
