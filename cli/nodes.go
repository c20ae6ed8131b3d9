package cli

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
)

// addCIDFlag adds --cid, which defaults to the configured cid.
func addCIDFlag(c *cobra.Command, cid *string) {
	c.Flags().StringVar(cid, "cid", "", "the cluster (default: the configured cid, see runos config set cid)")
}

// clusterID is --cid, else the configured cid; checked before any request.
func (a *app) clusterID(flag string) (string, error) {
	cid := flag
	if cid == "" {
		e, err := a.effective()
		if err != nil {
			return "", err
		}
		cid = e.CID
	}
	if cid == "" {
		return "", usagef("no cluster given: pass --cid <cid> or set a default with `runos config set cid <cid>`")
	}
	return cid, cidArg(cid)
}

// clusterCall is opCall for a request about one cluster: cidFlag is --cid,
// resolved as clusterID does before anything is sent, and what (say "show
// node n1") names the request in errors together with the cluster. It
// returns the cluster too, for what is printed after.
func clusterCall[T any](ctx context.Context, a *app, cidFlag, what string, fn func(ctx context.Context, c *api.Client, cid string) (T, error)) (T, string, error) {
	return clusterChange(ctx, a, cidFlag, what, "", fn)
}

// clusterChange is clusterCall for a change; check (with %s for the cid)
// is the command that shows whether it took effect.
func clusterChange[T any](ctx context.Context, a *app, cidFlag, what, check string, fn func(ctx context.Context, c *api.Client, cid string) (T, error)) (T, string, error) {
	cid, err := a.clusterID(cidFlag)
	if err != nil {
		var zero T
		return zero, "", err
	}
	if check != "" {
		check = fmt.Sprintf(check, cid)
	}
	v, err := opChange(ctx, a, what+" of "+cid, check, func(ctx context.Context, c *api.Client) (T, error) {
		return fn(ctx, c, cid)
	})
	return v, cid, err
}

func (a *app) nodesCmd() *cobra.Command {
	return a.group("nodes", "Inspect nodes, set their ingress address, remove them",
		`A node carries one or both roles: control-plane and worker. Its status is
ready while its agent heartbeats and flips to no_heartbeat after 30 seconds
without one. INGRESSIP is the address devices dial when the node hosts the
VPN server: its declared ingress address, falling back to its detected
public address.

These are operator verbs: runos login first, or set RUNOS_TOKEN.`,
		a.nodesListCmd(), a.nodesShowCmd(), a.nodesIngressCmd(), a.nodesDeleteCmd(), a.nodesPreflightCmd())
}

func (a *app) nodesListCmd() *cobra.Command {
	var cid string
	var asJSON bool
	c := &cobra.Command{
		Use:     "list",
		Short:   "List a cluster's nodes",
		Example: `  runos nodes list --cid ky3`,
		Args:    exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			ns, _, err := clusterCall(cmd.Context(), a, cid, "list nodes", func(ctx context.Context, c *api.Client, cid string) ([]api.Node, error) {
				return c.Nodes(ctx, cid)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSONList(a.env.Stdout, ns)
			}
			renderNodes(a.env.Stdout, ns)
			return nil
		}),
	}
	addCIDFlag(c, &cid)
	c.Flags().BoolVar(&asJSON, "json", false, "print the nodes as JSON")
	return c
}

func (a *app) nodesShowCmd() *cobra.Command {
	var cid string
	var asJSON bool
	c := &cobra.Command{
		Use:     "show NID",
		Short:   "Show one node",
		Example: `  runos nodes show n1 --cid ky3`,
		Args:    exactArgs("NID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			nid := args[0]
			n, _, err := clusterCall(cmd.Context(), a, cid, "show node "+nid, func(ctx context.Context, c *api.Client, cid string) (*api.Node, error) {
				return c.Node(ctx, cid, nid)
			})
			if err != nil {
				return err
			}
			return a.printNode(n, asJSON)
		}),
	}
	addCIDFlag(c, &cid)
	c.Flags().BoolVar(&asJSON, "json", false, "print the node as JSON")
	return c
}

// printNode prints n as JSON, or for people.
func (a *app) printNode(n *api.Node, asJSON bool) error {
	if asJSON {
		return printJSON(a.env.Stdout, n)
	}
	renderNode(a.env.Stdout, n)
	return nil
}

func renderNode(w io.Writer, n *api.Node) {
	line := func(k, v string) {
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(w, "%-18s %s\n", k, v)
	}
	line("Node", n.NID+" ("+n.Name+") in "+n.CID)
	line("Roles", strings.Join(n.Roles, ", "))
	line("Status", n.Status)
	ingress := n.IngressIP
	switch {
	case n.DeclaredIngressIP != "":
		ingress += " (declared)"
	case n.IngressIP != "":
		ingress += " (detected public address; no ingress address declared)"
	}
	line("Ingress address", ingress)
	line("Public address", n.PublicIP)
	line("Published", yesNo(n.Published))
	line("Hosts VPN server", yesNo(n.HostsVPN))
	if !n.LastHeartbeat.IsZero() {
		line("Last heartbeat", n.LastHeartbeat.UTC().Format("2006-01-02 15:04:05 MST"))
	}
}

type ingressFlags struct {
	cid                     string
	ip                      string
	notPublished, published bool
	asJSON                  bool
}

func (a *app) nodesIngressCmd() *cobra.Command {
	var f ingressFlags
	c := &cobra.Command{
		Use:   "ingress NID",
		Short: "Set a node's ingress address and whether it is DNS-published",
		Long: `Declare the address devices dial when this node hosts the VPN server, and
whether the node is in the cluster's public DNS records (k8s.<cid>…, *.<cid>…).

For a cluster reached only from your own network (a homelab), give the node
a private ingress address that is not published: most routers will not
hairpin a public address back inside.

Withholding the last DNS-published control plane is allowed only together
with a dialable private --ingress-ip; without one control refuses, because
the cluster would then keep no address anyone could dial. Withholding is
reversible: --ingress-published rebuilds the record.`,
		Example: `  runos nodes ingress n1 --cid ky3 --ingress-ip 10.77.0.21 --ingress-not-published
  runos nodes ingress n1 --cid ky3 --ingress-published`,
		Args: exactArgs("NID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error { return a.nodesIngress(cmd.Context(), args[0], f) }),
	}
	addCIDFlag(c, &f.cid)
	c.Flags().StringVar(&f.ip, "ingress-ip", "", "the address devices dial (IPv4 or IPv6)")
	c.Flags().BoolVar(&f.notPublished, "ingress-not-published", false, "withhold the node from the public DNS records")
	c.Flags().BoolVar(&f.published, "ingress-published", false, "publish the node in the public DNS records")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print the node as JSON")
	c.MarkFlagsMutuallyExclusive("ingress-not-published", "ingress-published")
	c.MarkFlagsOneRequired("ingress-ip", "ingress-not-published", "ingress-published")
	return c
}

// ingressRequest checks the flags locally and builds the request.
func ingressRequest(f ingressFlags) (api.NodeIngressRequest, error) {
	var r api.NodeIngressRequest
	if f.ip != "" {
		ip, err := netip.ParseAddr(f.ip)
		if err != nil || ip.Zone() != "" {
			return r, usagef("--ingress-ip %q: not an IP address", f.ip)
		}
		r.IngressIP = ip.String()
	}
	switch {
	case f.notPublished:
		r.Published = new(false)
	case f.published:
		r.Published = new(true)
	}
	return r, nil
}

func (a *app) nodesIngress(ctx context.Context, nid string, f ingressFlags) error {
	r, err := ingressRequest(f)
	if err != nil {
		return err
	}
	n, _, err := clusterChange(ctx, a, f.cid, "set the ingress of node "+nid, "runos nodes show "+nid+" --cid %s", func(ctx context.Context, c *api.Client, cid string) (*api.Node, error) {
		return c.SetNodeIngress(ctx, cid, nid, r)
	})
	if err != nil {
		return err
	}
	return a.printNode(n, f.asJSON)
}

func (a *app) nodesDeleteCmd() *cobra.Command {
	var cid string
	var reset, asJSON bool
	c := &cobra.Command{
		Use:   "delete NID",
		Short: "Remove a node from its cluster",
		Long: `Remove a node: the control plane drains it (cordon, then evict its pods)
and, for a control-plane node, removes its etcd member. The cloud server is
not deleted.

Refused for the node that hosts the VPN server (move the server off it
first with runos services wireguard move), and for the last control-plane
node unless --reset-cluster is given, which is irreversible.
runos nodes delete-preflight says beforehand what a removal would warn about.`,
		Example: `  runos nodes delete n2 --cid ky3
  runos nodes delete n1 --cid ky3 --reset-cluster   # the last control plane: irreversible`,
		Args: exactArgs("NID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			nid := args[0]
			_, cid, err := clusterChange(cmd.Context(), a, cid, "delete node "+nid, "runos nodes list --cid %s", func(ctx context.Context, c *api.Client, cid string) (struct{}, error) {
				return struct{}{}, c.DeleteNode(ctx, cid, nid, reset)
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, map[string]any{"cid": cid, "nid": nid, "deleted": true, "resetCluster": reset})
			}
			fmt.Fprintf(a.env.Stdout, "Deleted node %s of %s.\n", nid, cid)
			return nil
		}),
	}
	addCIDFlag(c, &cid)
	c.Flags().BoolVar(&reset, "reset-cluster", false, "also reset the cluster when removing its last control-plane node (irreversible)")
	c.Flags().BoolVar(&asJSON, "json", false, "print {cid, nid, deleted, resetCluster} as JSON")
	return c
}

func (a *app) nodesPreflightCmd() *cobra.Command {
	var cid string
	var asJSON bool
	c := &cobra.Command{
		Use:   "delete-preflight NID",
		Short: "Say what removing a node would warn about or refuse",
		Long: `Say, changing nothing, what runos nodes delete would do: warnings (such as
leaving etcd on an even voting-member count) are advisory and never block;
refusals name the rule that would stop the delete and what to do instead.`,
		Example: `  runos nodes delete-preflight n2 --cid ky3`,
		Args:    exactArgs("NID"),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			nid := args[0]
			p, cid, err := clusterCall(cmd.Context(), a, cid, "delete-preflight of node "+nid, func(ctx context.Context, c *api.Client, cid string) (*api.DeletePreflight, error) {
				return c.DeletePreflight(ctx, cid, nid)
			})
			if err != nil {
				return err
			}
			if asJSON {
				if p.Warnings == nil {
					p.Warnings = []string{}
				}
				if p.Refusals == nil {
					p.Refusals = []string{}
				}
				return printJSON(a.env.Stdout, p)
			}
			w := a.env.Stdout
			for _, s := range p.Warnings {
				fmt.Fprintf(w, "warning: %s\n", s)
			}
			for _, s := range p.Refusals {
				fmt.Fprintf(w, "refused: %s\n", s)
			}
			if len(p.Refusals) == 0 {
				fmt.Fprintf(w, "Node %s of %s can be deleted.\n", nid, cid)
			}
			return nil
		}),
	}
	addCIDFlag(c, &cid)
	c.Flags().BoolVar(&asJSON, "json", false, "print {warnings, refusals} as JSON")
	return c
}
