// Package reach is the VPN node's door into its cluster: devices' TCP
// connections and UDP flows to the cluster's declared internal prefixes (node network,
// pod range, Service range; and the same under the cluster's mapped IPv6
// range) are taken off the WireGuard interface and relayed from the node
// itself, and everything else devices send through the node is dropped and
// counted: the node's other addresses and networks, the internet, other
// clusters' ranges, and other devices.
//
// Why a relay from the node, not source NAT: with SNAT the kernel forwards
// a device's packets, and forwarded packets never pass the output hook —
// a cluster whose Services are translated only for the node's own sockets
// (a CNI that translates at connect, as the lab's xym) would see its
// ClusterIPs unreachable; and the mapped IPv6 range would need NAT64 in the
// kernel. Here nftables' TPROXY hands each device connection (or UDP
// flow) to a transparent listener of the gateway (the connection's local address is
// what the device dialled), which dials the real address from the node:
// the node's own connection, seen by the output hook like kube-proxy's or a
// socket-level CNI's, answered to the node without any route back, and the
// mapping undone in one place (Target). Both TCP legs stay in the kernel
// and Go splices them (splice(2)), so no userspace TCP stack is needed
// (Tailscale's userspace subnet router needs gVisor's because it has no
// kernel interface; the node has one). Measured (e2e BenchmarkReach,
// docs/performance.md): iperf3 from a laptop to another node through the
// VPN node ran at 1.02× (median of three runs) what it ran to the VPN node
// itself when the lab's nodes shared a bridge, so the relay costs nothing
// the tunnel does not; over the lab's WireGuard mesh it runs at what the
// mesh carries between the nodes (0.95 to 1.04× of it). A UDP flow's
// answers leave from the address the device sent to (a transparent socket
// connected to the device, which the flow's next datagrams reach directly)
// and the flow ends after UDPIdle. Names go through the cluster DNS.
//
// Ping (ICMP echo, IPv4) is the one thing forwarded by the kernel, not
// relayed: an echo request from the devices' pool to a declared prefix is
// let through and source-NATed to the node's address in a nat postrouting
// chain (conntrack turns the replies back to the device), so a laptop pings
// a node's internal address or a pod IP. That needs IPv4 forwarding on the
// node (Kubernetes nodes have it; the gateway warns when
// net.ipv4.ip_forward is 0 and leaves the sysctl alone). ClusterIPs do not
// answer ping, as in Kubernetes with kube-proxy: they are translated for
// TCP and UDP ports only. Ping under the mapped IPv6 range stays dropped
// (and counted): ICMPv6 to the mapped address would have to be translated
// to ICMP (and the answers back), which this package does not do. Other
// ICMP and other protocols into the cluster are dropped and counted.
//
// The rules are nftables programmed through netlink (google/nftables): no
// nft binary on the node, the table replaced in one batch (Ruleset, whose
// String is nft's own listing of it).
//
// What it is not: a policy engine (who may reach which port is later work,
// control/policy) or a WireGuard host (the interface is gateway/wgserver's;
// this package only adds rules, routes and a listener beside it).
package reach

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/runos/vpn/api"
)

// Spec is what the node forwards for its cluster's devices.
type Spec struct {
	Interface  string         // the WireGuard interface devices arrive on
	Server     netip.Addr     // the VPN server's address: devices reach the node there (DNS, ingress)
	DevicePool netip.Prefix   // devices' IPv4 tunnel addresses: device to device is dropped
	Prefixes   []netip.Prefix // the cluster's declared internal IPv4 prefixes
	Mapped     netip.Prefix   // the cluster's mapped /96 (invalid: none)
}

// Enabled reports whether there is anything to forward.
func (s Spec) Enabled() bool { return len(s.Prefixes) > 0 }

// SpecFor derives the Spec from control's inside of the cluster.
func SpecFor(iface string, server netip.Addr, pool netip.Prefix, in *api.ClusterInside) (Spec, error) {
	s := Spec{Interface: iface, Server: server, DevicePool: pool}
	if in == nil {
		return s, nil
	}
	if err := in.Check(); err != nil {
		return s, fmt.Errorf("inside of the cluster: %w", err)
	}
	s.Prefixes = in.Prefixes()
	if in.Mapped != "" {
		s.Mapped = netip.MustParsePrefix(in.Mapped)
	}
	return s, nil
}

// ErrNotDeclared is returned by Target for an address outside the
// declared prefixes.
var ErrNotDeclared = errors.New("not in the cluster's declared prefixes")

// Target is the address inside the cluster a device's connection to dst
// goes to: dst itself for an IPv4 address, the IPv4 address it stands for
// in the mapped range; either must lie in a declared prefix.
func (s Spec) Target(dst netip.AddrPort) (netip.AddrPort, error) {
	a := dst.Addr().Unmap()
	if a.Is6() {
		if !s.Mapped.IsValid() {
			return netip.AddrPort{}, fmt.Errorf("%s: the cluster has no mapped range", a)
		}
		v4, err := api.Unmapped(s.Mapped, a)
		if err != nil {
			return netip.AddrPort{}, err
		}
		a = v4
	}
	for _, p := range s.Prefixes {
		if p.Contains(a) {
			return netip.AddrPortFrom(a, dst.Port()), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("%s: %w", a, ErrNotDeclared)
}

// Drop reasons, the counters' names (and the metric's label).
const (
	DropDevice     = "device_to_device" // to another device's tunnel address
	DropNode       = "node"             // to an address of the node other than the VPN server's
	DropProtocol   = "protocol"         // neither TCP, UDP nor ICMP echo (IPv4), into a declared prefix or the mapped range
	DropUndeclared = "undeclared"       // anywhere else: other networks, the internet, other clusters
)

// DropReasons lists every reason, in a fixed order.
var DropReasons = []string{DropDevice, DropNode, DropProtocol, DropUndeclared}
