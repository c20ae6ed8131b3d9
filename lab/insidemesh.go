//go:build !windows

package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// A cluster's internal network is what the product docs call its internal
// overlay: a WireGuard mesh between its nodes. Every node runs Debian's
// wireguard-go for interface int0 (insideIf), configured with Debian's wg:
// its internal address, and one peer per other node of the cluster whose
// allowed IPs are that node's internal address, its pods' /24 and, on the
// control-plane node, the API VIP.
//
// The underlay is the nodes' public addresses on the lab's WAN, port
// meshPort: the simplest honest choice. A cluster's nodes reach each
// other there already (the lab's nodes, like a RunOS cluster's, are known
// by a detected public address), so the mesh adds no network of its own
// to the lab (the bridge the nodes shared before is gone), nothing but the
// mesh joins the nodes' internal addresses, and whatever the lab does to
// the WAN it does to the mesh. The mesh's MTU is
// WireGuard's usual 1420 under the WAN's 1500: the gateway relays a
// device's connections from the node's own sockets (gateway/reach), whose
// MSS follows int0's MTU, so large transfers into the cluster need no
// fragmentation.
//
// Debian's wireguard-go (0.0.20220316 in Debian 12) moves one packet per
// system call and leaves its UDP receive buffer at the default: between
// two lab nodes it carries a few hundred Mbit/s, well under the devices'
// tunnel, and it is then what limits a device's throughput to another
// node (docs/performance.md, issue 21). A node's PATH starts with the
// lab's program directory, so a wireguard-go put there runs instead (the
// benchmark's comparison with the version runos-gateway embeds).
//
// wireguard-go runs as one of the lab's recorded processes ("mesh"), so
// down stops it by PID (it removes its interface and its UAPI socket on
// SIGTERM); the socket lives in the host's private /run/wireguard, a
// directory of the lab that down removes in any case.
const (
	meshPort = 51820
	meshMTU  = 1420
	meshProc = "mesh"
)

// EnvMesh is a cluster's internal network as env.json gives it.
type EnvMesh struct {
	Kind      string `json:"kind"`      // wireguard
	Interface string `json:"interface"` // on every node: int0
	Port      int    `json:"port"`      // UDP, on the nodes' public addresses
	MTU       int    `json:"mtu"`
}

func meshEnv() *EnvMesh {
	return &EnvMesh{Kind: "wireguard", Interface: insideIf, Port: meshPort, MTU: meshMTU}
}

// meshProcs are the wireguard-go of every node of a cluster, in the
// foreground so that the recorded PID is the one that holds the interface.
func meshProcs(c Cluster) []Proc {
	var ps []Proc
	for _, n := range c.Nodes {
		ps = append(ps, Proc{Host: NodeHost(c.CID, n.NID), Name: meshProc, Argv: []string{"wireguard-go", "-f", insideIf}})
	}
	return ps
}

// meshSocket is where a node's wireguard-go serves its UAPI, seen from
// outside the node's mount namespace.
func (l *Lab) meshSocket(host string) string {
	return filepath.Join(l.hostDir(host), "wireguard", insideIf+".sock")
}

func (l *Lab) meshKeyFile(host string) string { return filepath.Join(l.hostDir(host), "mesh.key") }

// meshReady: the node's wireguard-go serves its UAPI (wg can configure it).
func (l *Lab) meshReady(p Proc) func(context.Context) error {
	return func(context.Context) error {
		_, err := os.Stat(l.meshSocket(p.Host))
		return err
	}
}

// startMesh starts the wireguard-go of every node of c, waits for each,
// and configures the whole mesh before any of it carries a packet: a
// handshake sent to a node not configured yet would wait for WireGuard's
// 5 s retry.
func (l *Lab) startMesh(ctx context.Context, c Cluster) error {
	ps := meshProcs(c)
	for _, p := range ps {
		if _, err := l.Start(p); err != nil {
			return err
		}
	}
	for _, p := range ps {
		if err := l.waitProc(ctx, p); err != nil {
			return err
		}
	}
	pubs := map[string]string{}
	for _, n := range c.Nodes {
		host := NodeHost(c.CID, n.NID)
		k, err := wgtypes.GeneratePrivateKey()
		if err != nil {
			return err
		}
		if err := os.WriteFile(l.meshKeyFile(host), []byte(k.String()+"\n"), 0o600); err != nil {
			return err
		}
		pubs[n.NID] = k.PublicKey().String()
	}
	for _, n := range c.Nodes {
		if err := l.configureMesh(ctx, c, n.NID, pubs); err != nil {
			return fmt.Errorf("internal network of %s: %w", NodeHost(c.CID, n.NID), err)
		}
	}
	return nil
}

// configureMesh gives node nid its key, port and peers with wg, and sets
// the interface's MTU and brings it up.
func (l *Lab) configureMesh(ctx context.Context, c Cluster, nid string, pubs map[string]string) error {
	host := NodeHost(c.CID, nid)
	args := []string{"wg", "set", insideIf, "private-key", l.meshKeyFile(host), "listen-port", strconv.Itoa(meshPort)}
	for _, o := range c.Nodes {
		if o.NID == nid {
			continue
		}
		ph, ok := l.topo.Host(NodeHost(c.CID, o.NID))
		if !ok {
			return fmt.Errorf("no host for node %s", o.NID)
		}
		args = append(args, "peer", pubs[o.NID], "endpoint", netip.AddrPortFrom(ph.Addrs[WAN], meshPort).String(),
			"allowed-ips", strings.Join(c.meshAllowedIPs(o.NID), ","))
	}
	wg := l.enter(host, args...)
	if _, err := l.run.Run(ctx, wg[0], wg[1:]...); err != nil {
		return err
	}
	ns := l.names.Netns(host)
	if err := l.ip(ctx, "-n", ns, "link", "set", insideIf, "mtu", strconv.Itoa(meshMTU)); err != nil {
		return err
	}
	return l.ip(ctx, "-n", ns, "link", "set", insideIf, "up")
}

// meshAllowedIPs is what a node's peers send it through the mesh: its
// internal address, its pods and, on the control-plane node, the VIP.
func (c Cluster) meshAllowedIPs(nid string) []string {
	ips := []string{netip.PrefixFrom(c.InternalIP(nid), 32).String(), c.podPrefix(nid).String()}
	if nid == c.dnsNode() {
		ips = append(ips, netip.PrefixFrom(InsideAPIVIP, 32).String())
	}
	return ips
}
