package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
)

func (a *app) clustersCmd() *cobra.Command {
	return a.group("clusters", "List your clusters and show one",
		`A cluster is identified by a cid: 3 to 16 lowercase letters and digits
(for example ky3). Most commands take --cid <cid>; set a default so you can
drop the flag: runos config set cid ky3.

These are operator verbs: runos login first, or set RUNOS_TOKEN.`,
		a.clustersListCmd(), a.clustersShowCmd())
}

func (a *app) clustersListCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List your clusters",
		Long: `List the clusters of your accounts. ISCONFIGURED is true once the base
stack is installed.`,
		Example: `  runos clusters list
  # CID  NAME     ISCONFIGURED
  # ky3  tc3-ky3  true
  # xym  tc2-xym  false`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			cs, err := opCall(cmd.Context(), a, "list clusters", func(ctx context.Context, c *api.Client) ([]api.Cluster, error) {
				return c.Clusters(ctx)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSONList(a.env.Stdout, cs)
			}
			t := newTable(a.env.Stdout, "CID", "NAME", "ISCONFIGURED")
			for _, c := range cs {
				t.row(c.CID, c.Name, yesNo(c.IsConfigured))
			}
			t.flush()
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the clusters as JSON")
	return c
}

func (a *app) clustersShowCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show CID",
		Short: "Show a cluster: domain, public DNS records, nodes and VPN service",
		Long: `Show a cluster: its built-in domain (cid.aid.<root>), the public DNS
records control keeps for it (k8s.<cid>… for the published control planes,
*.<cid>… for public app ingress), its nodes and its user-VPN service.`,
		Example: `  runos clusters show ky3
  runos clusters show ky3 --json`,
		Args: exactArgs("CID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			cid := args[0]
			if err := cidArg(cid); err != nil {
				return err
			}
			d, err := opCall(cmd.Context(), a, "show cluster "+cid, func(ctx context.Context, c *api.Client) (*api.ClusterDetail, error) {
				return c.Cluster(ctx, cid)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, d)
			}
			renderCluster(a.env.Stdout, d)
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the cluster as JSON")
	return c
}

func renderCluster(w io.Writer, d *api.ClusterDetail) {
	vpn := d.UserVPN
	if vpn == "" {
		vpn = "none"
	}
	fmt.Fprintf(w, "Cluster       %s (%s), account %s\n", d.CID, d.Name, d.AID)
	fmt.Fprintf(w, "Domain        %s\n", d.Domain)
	if len(d.CustomDomains) > 0 {
		fmt.Fprintf(w, "Custom        %s\n", strings.Join(d.CustomDomains, ", "))
	}
	fmt.Fprintf(w, "Configured    %s\n", yesNo(d.IsConfigured))
	fmt.Fprintf(w, "User VPN      %s\n", vpn)
	if p := d.DevicePool; p != nil {
		fmt.Fprintf(w, "Device pool   %s: %d of %d addresses in use\n", p.Prefix, p.Used, p.Size)
		if p.Warning != "" {
			fmt.Fprintf(w, "warning: %s\n", p.Warning)
		}
	}

	fmt.Fprintln(w, "\nDNS records")
	if len(d.DNSRecords) == 0 {
		fmt.Fprintln(w, "  none (no published node)")
	} else {
		t := newTable(w, "NAME", "TYPE", "VALUES")
		for _, r := range d.DNSRecords {
			t.row(r.Name, r.Type, strings.Join(r.Values, ","))
		}
		t.flush()
	}

	fmt.Fprintln(w, "\nNodes")
	renderNodes(w, d.Nodes)

	fmt.Fprintln(w, "\nInside (reached through the VPN node)")
	renderInside(w, d.Inside)

	fmt.Fprintln(w, "\nVPN service")
	if len(d.VPNServices) == 0 {
		fmt.Fprintf(w, "  none: add one with `runos services wireguard add --cid %s --target-node-id <nid> --name <name> --follow`\n", d.CID)
		return
	}
	renderServices(w, d.VPNServices)
}

// renderInside shows what a cluster's gateways reported lies inside it.
func renderInside(w io.Writer, in *api.ClusterInside) {
	if in == nil || in.Empty() {
		fmt.Fprintln(w, "  nothing declared (runos-gateway's --node-network, --pod-range, --service-range, --cluster-dns, --api-vip)")
		return
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	fmt.Fprintf(w, "  Node network   %s\n", dash(in.NodeNetwork))
	fmt.Fprintf(w, "  Pod range      %s\n", dash(in.PodRange))
	fmt.Fprintf(w, "  Service range  %s\n", dash(in.ServiceRange))
	fmt.Fprintf(w, "  Cluster DNS    %s\n", dash(in.DNSServer))
	fmt.Fprintf(w, "  API VIP        %s\n", dash(in.APIAddress))
	fmt.Fprintf(w, "  Mapped range   %s\n", dash(in.Mapped))
}

func renderNodes(w io.Writer, ns []api.Node) {
	t := newTable(w, "NID", "NAME", "ROLES", "STATUS", "INGRESSIP", "PUBLISHED", "VPN")
	for _, n := range ns {
		t.row(n.NID, n.Name, strings.Join(n.Roles, ","), n.Status, n.IngressIP, yesNo(n.Published), yesNo(n.HostsVPN))
	}
	t.flush()
}

func renderServices(w io.Writer, ss []api.VPNService) {
	t := newTable(w, "ID", "NAME", "NODE", "PORT", "STATE", "ENDPOINT", "ADDRESS", "DEVICES")
	for _, s := range ss {
		t.row(s.ID, s.Name, s.NodeID, strconv.Itoa(s.Port), s.State, endpointKind(s.Endpoint, s.AddressKind), s.Address, strconv.Itoa(s.Devices))
	}
	t.flush()
}

// endpointKind is "10.77.0.21:32768 (private)".
func endpointKind(endpoint, kind string) string {
	if endpoint == "" {
		return ""
	}
	if kind == "" {
		return endpoint
	}
	return endpoint + " (" + kind + ")"
}
