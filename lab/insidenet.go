//go:build !windows

package lab

import (
	"context"
	"fmt"
	"strings"
)

// insideIf is a node's interface on its cluster's internal network, and
// podsIf the interface that holds the addresses of its pods (the loopback:
// the machines' kernels have no dummy interfaces).
const (
	insideIf = "int0"
	podsIf   = "lo"
)

// kubeTable is the nftables table of a node's ClusterIP rules.
const kubeTable = "kube"

// buildInside gives every cluster its inside (see inside.go): the internal
// network between its nodes (a WireGuard mesh, insidemesh.go), the VIP on
// the first node, each node's pods on its loopback with routes to the
// other nodes' pods through the mesh, and the ClusterIP rules. It runs once
// the hosts have their mount namespaces: wireguard-go's UAPI socket goes
// in the node's private /run/wireguard.
func (l *Lab) buildInside(ctx context.Context) error {
	for _, c := range l.topo.Clusters {
		if err := l.startMesh(ctx, c); err != nil {
			return err
		}
		for _, n := range c.Nodes {
			if err := l.buildNodeInside(ctx, c, n.NID); err != nil {
				return fmt.Errorf("inside of %s: %w", NodeHost(c.CID, n.NID), err)
			}
		}
	}
	return nil
}

func (l *Lab) buildNodeInside(ctx context.Context, c Cluster, nid string) error {
	host := NodeHost(c.CID, nid)
	ns := l.names.Netns(host)
	steps := [][]string{
		{"-n", ns, "addr", "add", fmt.Sprintf("%s/%d", c.InternalIP(nid), InsideNodeNetwork.Bits()), "dev", insideIf},
	}
	if nid == c.dnsNode() {
		steps = append(steps, []string{"-n", ns, "addr", "add", InsideAPIVIP.String() + "/32", "dev", insideIf},
			[]string{"-n", ns, "addr", "add", c.podIP(nid, 53).String() + "/32", "dev", podsIf})
	}
	if nid == c.webNode() {
		steps = append(steps, []string{"-n", ns, "addr", "add", c.podIP(nid, 10).String() + "/32", "dev", podsIf})
	}
	// A route for the Service range, as a node's default route gives it:
	// a connection to a ClusterIP must be routable before the output
	// hook's DNAT sends it to the pod.
	steps = append(steps, []string{"-n", ns, "route", "add", InsideServiceRange.String(), "dev", insideIf})
	for _, o := range c.Nodes {
		if o.NID != nid {
			steps = append(steps, []string{"-n", ns, "route", "add", c.podPrefix(o.NID).String(), "dev", insideIf})
		}
	}
	for _, args := range steps {
		if err := l.ip(ctx, args...); err != nil {
			return err
		}
	}
	// A Kubernetes node forwards IPv4 (pods' traffic goes through it): the
	// VPN node's gateway relies on it for ping into the cluster.
	if _, err := l.run.Run(ctx, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return fmt.Errorf("forwarding: %w", err)
	}
	return l.nft(ctx, host, "kube", kubeRules(c))
}

// kubeRules are a node's ClusterIP rules: DNAT to the Service's pod in the
// output hook (the node's own connections) and, on a cluster whose
// Services kube-proxy implements, in prerouting too (forwarded packets).
func kubeRules(c Cluster) string {
	var rules strings.Builder
	for _, d := range c.dnats() {
		fmt.Fprintf(&rules, "\t\tip daddr %s %s dport %d dnat to %s\n", d.ip, d.proto, d.port, d.to)
	}
	chains := []string{"output"}
	if !c.OutputOnlyDNAT() {
		chains = append(chains, "prerouting")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n", kubeTable)
	for _, ch := range chains {
		fmt.Fprintf(&b, "\tchain %s {\n\t\ttype nat hook %s priority -100; policy accept;\n%s\t}\n", ch, ch, rules.String())
	}
	b.WriteString("}\n")
	return b.String()
}
