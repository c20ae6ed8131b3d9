//go:build !windows

package lab

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/lab/kube"
)

// The inside of every lab cluster: an internal network between its nodes,
// a pod range with each node's pods on a /24 of it, a Service range whose
// ClusterIPs are nftables DNAT to pod addresses (on ky3 as kube-proxy does,
// for forwarded and local traffic; on xym only the node's own connections,
// the output hook, like a CNI that translates at the socket), kube-dns at
// the Service range's .10 and the Kubernetes API on the control-plane
// nodes behind a VIP. Every cluster uses the same prefixes, as clusters
// made with the usual defaults do: every test of reach runs with overlap.
var (
	InsideNodeNetwork  = netip.MustParsePrefix("10.10.0.0/24")
	InsidePodRange     = netip.MustParsePrefix("10.244.0.0/16")
	InsideServiceRange = netip.MustParsePrefix("10.96.0.0/12")
	InsideDNS          = netip.MustParseAddr("10.96.0.10")
	InsideAPIVIP       = netip.MustParseAddr("10.10.0.100")
	insideKubernetes   = netip.MustParseAddr("10.96.0.1")
	insideWeb          = netip.MustParseAddr("10.96.0.20")
)

// Ports of the stand-ins inside a cluster.
const (
	APIPort    = 6443 // the Kubernetes API on the VIP
	podAppPort = 8080 // the web Service's pods
)

// Inside is the lab's declaration of what lies inside every cluster, as
// runos-gateway's flags give it.
func Inside() api.ClusterInside {
	return api.ClusterInside{NodeNetwork: InsideNodeNetwork.String(), PodRange: InsidePodRange.String(),
		ServiceRange: InsideServiceRange.String(), DNSServer: InsideDNS.String(), APIAddress: InsideAPIVIP.String()}
}

// insideFlags are runos-gateway's flags for Inside.
func insideFlags() []string {
	in := Inside()
	return []string{"--node-network", in.NodeNetwork, "--pod-range", in.PodRange, "--service-range", in.ServiceRange,
		"--cluster-dns", in.DNSServer, "--api-vip", in.APIAddress}
}

// nodeIndex is the node's place in its cluster (1-based): its internal
// address is .index of the node network, its pods live in 10.244.index.0/24.
func (c Cluster) nodeIndex(nid string) int {
	for i, n := range c.Nodes {
		if n.NID == nid {
			return i + 1
		}
	}
	return 0
}

// InternalIP is node nid's address on its cluster's internal network.
func (c Cluster) InternalIP(nid string) netip.Addr {
	b := InsideNodeNetwork.Addr().As4()
	b[3] = byte(c.nodeIndex(nid))
	return netip.AddrFrom4(b)
}

// podPrefix is the /24 of the pod range whose pods live on node nid.
func (c Cluster) podPrefix(nid string) netip.Prefix {
	b := InsidePodRange.Addr().As4()
	b[2] = byte(c.nodeIndex(nid))
	return netip.PrefixFrom(netip.AddrFrom4(b), 24)
}

// podIP is the address .last of node nid's pod /24.
func (c Cluster) podIP(nid string, last byte) netip.Addr {
	b := c.podPrefix(nid).Addr().As4()
	b[3] = last
	return netip.AddrFrom4(b)
}

// webNode is where the web Service's pod lives: the cluster's last node,
// another than the VPN node when the cluster has two.
func (c Cluster) webNode() string { return c.Nodes[len(c.Nodes)-1].NID }

// dnsNode is where kube-dns' pod lives, and apiNode the control-plane node
// holding the VIP: the cluster's first node.
func (c Cluster) dnsNode() string { return c.Nodes[0].NID }

// OutputOnlyDNAT says whether the cluster's ClusterIPs are translated only
// for the nodes' own connections (xym), not for forwarded packets (ky3).
func (c Cluster) OutputOnlyDNAT() bool { return c.CID != "ky3" }

// dnat is one ClusterIP rule: proto daddr:port → to.
type dnat struct {
	proto string
	ip    netip.Addr
	port  int
	to    netip.AddrPort
}

func (c Cluster) dnats() []dnat {
	dnsPod := netip.AddrPortFrom(c.podIP(c.dnsNode(), 53), 53)
	return []dnat{
		{"tcp", insideWeb, 80, netip.AddrPortFrom(c.podIP(c.webNode(), 10), podAppPort)},
		{"udp", InsideDNS, 53, dnsPod},
		{"tcp", InsideDNS, 53, dnsPod},
		{"tcp", insideKubernetes, 443, netip.AddrPortFrom(InsideAPIVIP, APIPort)},
	}
}

// KubeWorld is what the cluster's kube-dns and API stand-ins know.
func (c Cluster) KubeWorld() kube.World {
	web := c.podIP(c.webNode(), 10)
	dns := c.podIP(c.dnsNode(), 53)
	return kube.World{Cluster: c.CID,
		Services: []kube.Service{
			{Name: "web", Namespace: "default", ClusterIP: insideWeb, Port: 80},
			{Name: "kubernetes", Namespace: "default", ClusterIP: insideKubernetes, Port: 443},
			{Name: "kube-dns", Namespace: "kube-system", ClusterIP: InsideDNS, Port: 53},
			{Name: "web-pods", Namespace: "default", Pods: []netip.Addr{web}},
		},
		Pods: []kube.Pod{
			{Name: "web-" + c.webNode(), Namespace: "default", Node: c.webNode(), IP: web},
			{Name: "coredns-" + c.dnsNode(), Namespace: "kube-system", Node: c.dnsNode(), IP: dns},
		},
	}
}

// ServiceDNSName is a Service's per-cluster name on the VPN:
// <service>.<namespace>.svc.<cid>.<aid>.<root>.
func (t *Topology) ServiceDNSName(cid, name, ns string) string {
	return fmt.Sprintf("%s.%s.svc.%s", name, ns, t.Domain(cid))
}

// APIName is the cluster's Kubernetes API name: k8s.<cid>.<aid>.<root>.
func (t *Topology) APIName(cid string) string { return "k8s." + t.Domain(cid) }

// Paths of a cluster's inside in the lab directory.
func (l *Lab) kubeDir() string                 { return filepath.Join(l.dir, "kube") }
func (l *Lab) kubeconfig(cid string) string    { return filepath.Join(l.kubeDir(), cid+".kubeconfig") }
func (l *Lab) kubeWorldFile(cid string) string { return filepath.Join(l.kubeDir(), cid+".world.json") }
func (l *Lab) kubeCert(cid string) string      { return filepath.Join(l.kubeDir(), cid+".apiserver.pem") }
func (l *Lab) kubeKey(cid string) string       { return filepath.Join(l.kubeDir(), cid+".apiserver-key.pem") }
