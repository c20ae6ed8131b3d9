//go:build !windows

package lab

import (
	"context"
	"fmt"
	"strings"
)

// insideBridge is a cluster's internal network: a bridge in the switch
// namespace that only that cluster's nodes join.
func insideBridge(cid string) string { return "bi-" + cid }

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
// network between its nodes (plain veth pairs on a bridge: a real cluster's
// nodes are joined by a WireGuard mesh, which changes nothing of what the
// VPN node sees), the VIP on the first node, each node's pods on its
// loopback with routes to the other nodes' pods, and the ClusterIP rules.
func (l *Lab) buildInside(ctx context.Context) error {
	sw := l.names.Switch()
	for _, c := range l.topo.Clusters {
		br := insideBridge(c.CID)
		if err := l.ip(ctx, "-n", sw, "link", "add", br, "type", "bridge"); err != nil {
			return err
		}
		if err := l.ip(ctx, "-n", sw, "link", "set", br, "up"); err != nil {
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
	ns, sw := l.names.Netns(host), l.names.Switch()
	port := host + ".i"
	if len(port) > 15 {
		port = fmt.Sprintf("i%02d.%s", c.nodeIndex(nid), c.CID)
	}
	steps := [][]string{
		{"link", "add", "name", insideIf, "netns", ns, "type", "veth", "peer", "name", port, "netns", sw},
		{"-n", sw, "link", "set", port, "master", insideBridge(c.CID)},
		{"-n", sw, "link", "set", port, "up"},
		{"-n", ns, "addr", "add", fmt.Sprintf("%s/%d", c.InternalIP(nid), InsideNodeNetwork.Bits()), "dev", insideIf},
		{"-n", ns, "link", "set", insideIf, "up"},
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
			steps = append(steps, []string{"-n", ns, "route", "add", c.podPrefix(o.NID).String(), "via", c.InternalIP(o.NID).String()})
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
