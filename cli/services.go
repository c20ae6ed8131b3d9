package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
)

// defaultFollowTimeout bounds --follow of add and move.
const defaultFollowTimeout = 2 * time.Minute

func (a *app) servicesCmd() *cobra.Command {
	wg := a.group("wireguard", "The cluster's WireGuard user-VPN server",
		`The user-VPN server is a wireguard service running on one node of the
cluster. Devices dial that node's ingress address (the INGRESSIP column of
runos nodes list), on UDP 32768 by default. A cluster runs one user-VPN
server, and WireGuard and NetBird are mutually exclusive.

These are operator verbs: runos login first, or set RUNOS_TOKEN.`,
		a.wgAddCmd(), a.wgListCmd(), a.wgShowCmd(), a.wgMoveCmd(), a.wgRelayCmd())
	return a.group("services", "Cluster services (the WireGuard user-VPN server)",
		"Cluster services. Today: wireguard, the cluster's user-VPN server.", wg)
}

type addFlags struct {
	cid, node, name, relay string
	port                   int
	follow, asJSON         bool
	timeout                time.Duration
}

func (a *app) wgAddCmd() *cobra.Command {
	var f addFlags
	c := &cobra.Command{
		Use:   "add",
		Short: "Install the cluster's user-VPN server on a node",
		Long: `Install the cluster's one user-VPN server on a node. Pick the node with
care: devices will dial its ingress address. For a cluster reached only from
your own network, give the node a private ingress address first
(runos nodes ingress <nid> --ingress-ip <lan-ip> --ingress-not-published).

A second WireGuard server in the same cluster is refused, and so is one in
a cluster whose user VPN is NetBird. With --follow it shows each step until
the server is serving (gateway up, key reported, listening) and exits
non-zero if it fails.`,
		Example: `  runos services wireguard add --cid ky3 --target-node-id n1 --name vpn --follow`,
		Args:    exactArgs(),
		RunE:    a.run(func(cmd *cobra.Command, _ []string) error { return a.wgAdd(cmd.Context(), f) }),
	}
	addCIDFlag(c, &f.cid)
	c.Flags().StringVar(&f.node, "target-node-id", "", "the node that hosts the server (required)")
	c.Flags().StringVar(&f.name, "name", "", "the service's name (required)")
	c.Flags().IntVar(&f.port, "port", api.DefaultVPNPort, "the UDP port devices dial")
	c.Flags().StringVar(&f.relay, "relay-url", "", "the relay devices use where UDP is blocked (default https://<ingress>/runos-vpn/relay; "+api.RelayIngress+" stands for the node's ingress address)")
	c.Flags().BoolVar(&f.follow, "follow", false, "show progress until the server is serving")
	c.Flags().DurationVar(&f.timeout, "timeout", defaultFollowTimeout, "with --follow, how long to wait")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the service as JSON (the final one with --follow)")
	_ = c.MarkFlagRequired("target-node-id")
	_ = c.MarkFlagRequired("name")
	return c
}

func (a *app) wgAdd(ctx context.Context, f addFlags) error {
	if f.port < 1 || f.port > 65535 {
		return usagef("--port %d: want a UDP port, 1 to 65535", f.port)
	}
	if err := checkTimeout(f.timeout); err != nil {
		return err
	}
	if err := api.CheckRelayURL(f.relay); err != nil {
		return usagef("--relay-url: %v", err)
	}
	cid, err := a.clusterID(f.cid)
	if err != nil {
		return err
	}
	what := "add the WireGuard server of " + cid
	s, err := opChange(ctx, a, what, "runos services wireguard list --cid "+cid, func(ctx context.Context, c *api.Client) (*api.VPNService, error) {
		return c.AddVPNService(ctx, cid, api.AddVPNServiceRequest{Name: f.name, TargetNodeID: f.node, Port: f.port, RelayURL: f.relay})
	})
	if err != nil {
		return err
	}
	out := a.env.Stdout
	if f.asJSON {
		out = a.env.Stderr // stdout carries only the JSON
	}
	fmt.Fprintf(out, "Added service %s (%s) of %s on node %s, UDP %d.\n", s.ID, s.Name, cid, s.NodeID, s.Port)
	if f.follow {
		s, err = a.followService(ctx, out, cid, s, f.timeout)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	} else if s.State != api.ServiceServing {
		fmt.Fprintf(out, "Watch it come up with `runos services wireguard show %s --cid %s`.\n", s.ID, cid)
	}
	if f.asJSON {
		return printJSON(a.env.Stdout, s)
	}
	return nil
}

// serviceSteps are the milestones a new service has reached, in order.
func serviceSteps(s *api.VPNService) []string {
	steps := []string{fmt.Sprintf("asked the gateway on %s to bring the server up", s.NodeID)}
	if s.PublicKey != "" {
		steps = append(steps, fmt.Sprintf("gateway up on %s, key reported: %s", s.NodeID, s.PublicKey))
	}
	if s.State == api.ServiceServing {
		steps = append(steps, fmt.Sprintf("listening on UDP %d: devices dial %s", s.Port, endpointKind(s.Endpoint, s.AddressKind)))
	}
	return steps
}

// followService follows the service until it serves or fails (a push
// stream, or long-polls from an older control), printing each new
// milestone.
func (a *app) followService(ctx context.Context, out io.Writer, cid string, s *api.VPNService, timeout time.Duration) (*api.VPNService, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, src, err := a.operator()
	if err != nil {
		return s, err
	}
	shown := 0
	show := func(next *api.VPNService) bool {
		s = next
		steps := serviceSteps(s)
		for ; shown < len(steps); shown++ {
			fmt.Fprintf(out, "  %s\n", steps[shown])
		}
		return s.State == api.ServiceServing || s.State == api.ServiceFailed
	}
	if !show(s) {
		err = followDoc(ctx, s.Version, func(s *api.VPNService) uint64 { return s.Version },
			func(ctx context.Context, since uint64, each func(*api.VPNService) error) error {
				return c.WatchVPNService(ctx, cid, s.ID, since, each)
			},
			func(ctx context.Context, since uint64) (*api.VPNService, error) {
				return c.VPNService(ctx, cid, s.ID, since, pollWait)
			}, show)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return s, fmt.Errorf("service %s is still %s after %s (run `runos services wireguard show %s --cid %s` to check on it)", s.ID, s.State, timeout, s.ID, cid)
	case err != nil:
		return s, controlErr("follow service "+s.ID, src, err)
	case s.State == api.ServiceFailed:
		return s, fmt.Errorf("service %s failed: %s", s.ID, orUnknown(s.Error))
	}
	fmt.Fprintf(out, "Serving: devices that connect to %s dial %s.\n", cid, s.Endpoint)
	return s, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// retryable says whether a failed long-poll is worth repeating: the network
// or an unavailable control, not a refusal or a bad token.
func retryable(err error) bool {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Status >= 500
	}
	return true
}

func (a *app) wgListCmd() *cobra.Command {
	var cid string
	var asJSON bool
	c := &cobra.Command{
		Use:     "list",
		Short:   "List the cluster's WireGuard servers (zero or one)",
		Example: `  runos services wireguard list --cid ky3`,
		Args:    exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			cid, err := a.clusterID(cid)
			if err != nil {
				return err
			}
			ss, err := opCall(cmd.Context(), a, "list the WireGuard services of "+cid, func(ctx context.Context, c *api.Client) ([]api.VPNService, error) {
				return c.VPNServices(ctx, cid)
			})
			if err != nil {
				return err
			}
			if asJSON {
				if ss == nil {
					ss = []api.VPNService{}
				}
				return printJSON(a.env.Stdout, ss)
			}
			if len(ss) == 0 {
				fmt.Fprintf(a.env.Stdout, "No WireGuard server in %s: add one with `runos services wireguard add --cid %s --target-node-id <nid> --name <name> --follow`.\n", cid, cid)
				return nil
			}
			renderServices(a.env.Stdout, ss)
			return nil
		}),
	}
	addCIDFlag(c, &cid)
	c.Flags().BoolVar(&asJSON, "json", false, "print the services as JSON")
	return c
}

func (a *app) wgShowCmd() *cobra.Command {
	var cid string
	var asJSON bool
	c := &cobra.Command{
		Use:   "show ID",
		Short: "Show a WireGuard server: node, port, the address devices are given, devices",
		Example: `  runos services wireguard show wg-ky3 --cid ky3
  runos services wireguard show wg-ky3 --cid ky3 --json`,
		Args: exactArgs("ID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			cid, err := a.clusterID(cid)
			if err != nil {
				return err
			}
			id := args[0]
			s, err := opCall(cmd.Context(), a, "show service "+id+" of "+cid, func(ctx context.Context, c *api.Client) (*api.VPNService, error) {
				return c.VPNService(ctx, cid, id, 0, 0)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, s)
			}
			renderService(a.env.Stdout, s)
			return nil
		}),
	}
	addCIDFlag(c, &cid)
	c.Flags().BoolVar(&asJSON, "json", false, "print the service as JSON")
	return c
}

func renderService(w io.Writer, s *api.VPNService) {
	line := func(k, v string) {
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(w, "%-18s %s\n", k, v)
	}
	line("Service", s.ID+" ("+s.Name+") in "+s.CID)
	line("Node", s.NodeID)
	line("Port", "UDP "+strconv.Itoa(s.Port))
	state := s.State
	if s.Error != "" {
		state += ": " + s.Error
	}
	line("State", state)
	line("Devices dial", endpointKind(s.Endpoint, s.AddressKind))
	relay := s.Relay
	if s.RelayURL != "" {
		relay += " (set: " + s.RelayURL + ")"
	}
	line("Relay (no UDP)", relay)
	line("Subnet", s.Subnet)
	line("Server address", s.Address)
	line("Public key", s.PublicKey)
	line("Devices", strconv.Itoa(s.Devices)+" connected")
}

func (a *app) wgRelayCmd() *cobra.Command {
	var cid, relay string
	var reset, asJSON bool
	c := &cobra.Command{
		Use:   "relay ID (--url URL | --default)",
		Short: "Set the relay URL devices use where UDP is blocked",
		Long: `Where a network lets no UDP through, devices carry WireGuard over HTTPS to
the node hosting the server: by default https://<ingress>/runos-vpn/relay, the
node's ingress on 443, where Traefik routes that path to runos-gateway. Give
another URL when devices must reach the relay some other way (a name with a
certificate, another port); ` + api.RelayIngress + ` in it stands for the hosting node's
ingress address, so the relay still follows a move. Devices are told at once.`,
		Example: `  runos services wireguard relay wg-ky3 --cid ky3 --url https://vpn.ky3.example.com/runos-vpn/relay
  runos services wireguard relay wg-ky3 --cid ky3 --url 'https://{ingress}:8443/runos-vpn/relay'
  runos services wireguard relay wg-ky3 --cid ky3 --default`,
		Args: exactArgs("ID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if reset == (relay != "") {
				return usagef("give --url URL or --default")
			}
			if err := api.CheckRelayURL(relay); err != nil {
				return usagef("--url: %v", err)
			}
			cid, err := a.clusterID(cid)
			if err != nil {
				return err
			}
			id := args[0]
			s, err := opChange(cmd.Context(), a, "set the relay of service "+id+" of "+cid, "runos services wireguard show "+id+" --cid "+cid, func(ctx context.Context, c *api.Client) (*api.VPNService, error) {
				return c.SetServiceRelay(ctx, cid, id, api.SetRelayRequest{RelayURL: relay})
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, s)
			}
			fmt.Fprintf(a.env.Stdout, "Devices of %s use the relay %s where UDP is blocked.\n", cid, s.Relay)
			return nil
		}),
	}
	addCIDFlag(c, &cid)
	c.Flags().StringVar(&relay, "url", "", "the relay URL (https://…; "+api.RelayIngress+" for the node's ingress address)")
	c.Flags().BoolVar(&reset, "default", false, "use the default relay URL again")
	c.Flags().BoolVar(&asJSON, "json", false, "print the service as JSON")
	return c
}
