//go:build !windows

package lab

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
)

// Host kinds.
const (
	KindControl  = "control"
	KindLaptop   = "laptop"
	KindNode     = "node"
	KindResolver = "resolver"
	KindReplica  = "replica"  // one of several runos-control replicas (control-1…)
	KindDatabase = "database" // PostgreSQL, the replicas' store
)

// Stores of the lab's control.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// MaxReplicas bounds --control-replicas: replicas take WAN .11 up to .19.
const MaxReplicas = 9

// Segment names.
const (
	WAN = "wan"
	LAN = "lan"
)

// MaxClients bounds --clients: laptops take WAN and LAN addresses .101 up.
const MaxClients = 50

// Segment is a shared network: a bridge inside the lab's switch namespace.
type Segment struct {
	Name   string       // wan, lan
	Prefix netip.Prefix // 198.51.100.0/24, 10.77.0.0/24
}

// Host is one machine of the lab: a network namespace and a mount
// namespace of its own.
type Host struct {
	Name  string                // control, client, client2, ky3-n1, lan
	Kind  string                // control, laptop, node, resolver
	Addrs map[string]netip.Addr // segment → address on it
	CID   string                // nodes only
	NID   string                // nodes only
}

// Node is a node of a cluster as the world file declares it.
type Node struct {
	NID       string
	Name      string
	Roles     []string
	PublicIP  netip.Addr // detected public address (WAN)
	IngressIP netip.Addr // declared ingress address; zero if none
	Published bool
}

// Cluster is a cluster of the world.
type Cluster struct {
	CID          string
	Name         string
	IsConfigured bool
	Nodes        []Node
	VPNID        string // the seeded WireGuard service
	VPNName      string
	VPNNode      string
}

// Topology is the whole lab: segments, hosts and the world they play.
type Topology struct {
	AID        string
	DomainRoot string
	User       string
	Segments   []Segment
	Hosts      []Host
	Clusters   []Cluster
	ControlIP  netip.Addr
	ResolverIP netip.Addr
	// WWW is the fixed answer of the LAN resolver for www.example.test, a
	// name that must resolve the same with or without the tunnel.
	WWW netip.Addr
	// Store is control's store (sqlite, postgres); Replicas how many
	// runos-control processes serve behind ControlIP (more than one: on
	// hosts control-1… with HAProxy on control). DBIP is host db's.
	Store    string
	Replicas int
	DBIP     netip.Addr
	// IdPIP is host idp's, the lab's OpenID Connect provider (lab/idp.go),
	// and IdPUsers its users.
	IdPIP    netip.Addr
	IdPUsers []IdPUser
}

// ReplicaName is the host name of the i-th control replica (1-based).
func ReplicaName(i int) string { return "control-" + strconv.Itoa(i) }

var (
	wanPrefix = netip.MustParsePrefix("198.51.100.0/24")
	lanPrefix = netip.MustParsePrefix("10.77.0.0/24")
)

// RouterWAN is the WAN leg of the lan host, the LAN's router.
var RouterWAN = wan(53)

func wan(last byte) netip.Addr { return netip.AddrFrom4([4]byte{198, 51, 100, last}) }
func lan(last byte) netip.Addr { return netip.AddrFrom4([4]byte{10, 77, 0, last}) }

// LaptopName is the host name of the i-th laptop (1-based): client,
// client2, client3…
func LaptopName(i int) string {
	if i == 1 {
		return "client"
	}
	return "client" + strconv.Itoa(i)
}

// NodeHost is the host name of a cluster's node: <cid>-<nid>.
func NodeHost(cid, nid string) string { return cid + "-" + nid }

// DefaultTopology is the lab of docs/internals.md "Lab": account rjwrn,
// clusters ky3 (n1 control-plane+worker with a declared private ingress,
// n2 worker with a public address only) and xym (n1), a LAN resolver, and
// `clients` laptops on both segments.
func DefaultTopology(clients int) (*Topology, error) {
	return TopologyFor(clients, StoreSQLite, 1)
}

// TopologyFor is DefaultTopology with control's store and its number of
// replicas: with postgres, host db (WAN .5) runs the database; with more
// than one replica, hosts control-1… (WAN .11…) run them and host control
// runs HAProxy at control's address.
func TopologyFor(clients int, storeKind string, replicas int) (*Topology, error) {
	if clients < 1 || clients > MaxClients {
		return nil, fmt.Errorf("--clients %d: want 1 to %d laptops", clients, MaxClients)
	}
	switch {
	case storeKind != StoreSQLite && storeKind != StorePostgres:
		return nil, fmt.Errorf("--store %q: want sqlite or postgres", storeKind)
	case replicas < 1 || replicas > MaxReplicas:
		return nil, fmt.Errorf("--control-replicas %d: want 1 to %d", replicas, MaxReplicas)
	case replicas > 1 && storeKind != StorePostgres:
		return nil, fmt.Errorf("--control-replicas %d needs --store postgres: a SQLite file has one runos-control", replicas)
	}
	cp := []string{"control-plane", "worker"}
	t := &Topology{
		AID:        "rjwrn",
		DomainRoot: "example.com",
		User:       "ops@rjwrn.example.com",
		Segments:   []Segment{{WAN, wanPrefix}, {LAN, lanPrefix}},
		ControlIP:  wan(10),
		ResolverIP: lan(53),
		WWW:        netip.MustParseAddr("192.0.2.80"),
		Clusters: []Cluster{
			{
				CID: "ky3", Name: "tc3-ky3", IsConfigured: true,
				Nodes: []Node{
					{NID: "n1", Name: "ky3-n1", Roles: cp, PublicIP: wan(21), IngressIP: lan(21), Published: true},
					{NID: "n2", Name: "ky3-n2", Roles: []string{"worker"}, PublicIP: wan(22)},
				},
				VPNID: "vpn-ky3", VPNName: "ky3-vpn", VPNNode: "n1",
			},
			{
				CID: "xym", Name: "tc2-xym",
				Nodes: []Node{
					{NID: "n1", Name: "xym-n1", Roles: cp, PublicIP: wan(31), Published: true},
				},
				VPNID: "vpn-xym", VPNName: "xym-vpn", VPNNode: "n1",
			},
		},
	}
	t.Store, t.Replicas = storeKind, replicas
	t.IdPIP, t.IdPUsers = wan(7), idpUsers(t.AID, t.DomainRoot)
	t.Hosts = append(t.Hosts,
		Host{Name: "control", Kind: KindControl, Addrs: map[string]netip.Addr{WAN: t.ControlIP}},
		// The LAN's resolver is its router too: a leg on the WAN, through
		// which a laptop that only has the LAN (runos-lab uplink … lan)
		// reaches the WAN behind NAT.
		Host{Name: "lan", Kind: KindResolver, Addrs: map[string]netip.Addr{LAN: t.ResolverIP, WAN: RouterWAN}},
	)
	t.Hosts = append(t.Hosts, Host{Name: IdPHost, Kind: KindIdP, Addrs: map[string]netip.Addr{WAN: t.IdPIP}})
	if storeKind == StorePostgres {
		t.DBIP = wan(5)
		t.Hosts = append(t.Hosts, Host{Name: "db", Kind: KindDatabase, Addrs: map[string]netip.Addr{WAN: t.DBIP}})
	}
	if replicas > 1 {
		for i := 1; i <= replicas; i++ {
			t.Hosts = append(t.Hosts, Host{Name: ReplicaName(i), Kind: KindReplica, Addrs: map[string]netip.Addr{WAN: wan(byte(10 + i))}})
		}
	}
	for _, c := range t.Clusters {
		for _, n := range c.Nodes {
			h := Host{Name: NodeHost(c.CID, n.NID), Kind: KindNode, CID: c.CID, NID: n.NID,
				Addrs: map[string]netip.Addr{WAN: n.PublicIP}}
			if n.IngressIP.IsValid() && lanPrefix.Contains(n.IngressIP) {
				h.Addrs[LAN] = n.IngressIP
			}
			t.Hosts = append(t.Hosts, h)
		}
	}
	for i := 1; i <= clients; i++ {
		t.Hosts = append(t.Hosts, Host{Name: LaptopName(i), Kind: KindLaptop,
			Addrs: map[string]netip.Addr{WAN: wan(byte(100 + i)), LAN: lan(byte(100 + i))}})
	}
	return t, nil
}

// ControlHosts are the hosts that run runos-control: control itself, or
// its replicas control-1… when there are several.
func (t *Topology) ControlHosts() []Host {
	var hs []Host
	for _, h := range t.Hosts {
		if h.Kind == KindReplica || (h.Kind == KindControl && t.Replicas <= 1) {
			hs = append(hs, h)
		}
	}
	return hs
}

// Host returns the host with that name.
func (t *Topology) Host(name string) (*Host, bool) {
	for i := range t.Hosts {
		if t.Hosts[i].Name == name {
			return &t.Hosts[i], true
		}
	}
	return nil, false
}

// Laptops returns the laptop hosts in order.
func (t *Topology) Laptops() []Host {
	var ls []Host
	for _, h := range t.Hosts {
		if h.Kind == KindLaptop {
			ls = append(ls, h)
		}
	}
	return ls
}

// Domain is a cluster's built-in domain: <cid>.<aid>.<root>.
func (t *Topology) Domain(cid string) string { return cid + "." + t.AID + "." + t.DomainRoot }

// PublicRecords are the clusters' public DNS records the LAN resolver
// serves (standing in for public DNS): the cluster's domain and every name
// under it go to the public address of its first published node.
func (t *Topology) PublicRecords() map[string]netip.Addr {
	recs := map[string]netip.Addr{"www.example.test": t.WWW}
	for _, c := range t.Clusters {
		for _, n := range c.Nodes {
			if n.Published {
				recs["*."+t.Domain(c.CID)] = n.PublicIP
				recs[t.Domain(c.CID)] = n.PublicIP
				break
			}
		}
	}
	return recs
}

// Names are the kernel-visible names of one lab, derived from its
// directory so that several labs run at once without colliding.
type Names struct {
	Prefix string // "rl" + 6 hex digits of the directory's hash
}

// NamesFor derives a lab's names from its (absolute) directory.
func NamesFor(dir string) Names {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	return Names{Prefix: "rl" + hex.EncodeToString(sum[:3])}
}

// Netns is the network namespace of a host.
func (n Names) Netns(host string) string { return n.Prefix + "-" + host }

// Switch is the lab-private namespace that holds the segments' bridges.
func (n Names) Switch() string { return n.Prefix + "-sw" }

// HostIf is a host's interface on a segment: wan0, lan0.
func HostIf(seg string) string { return seg + "0" }

// SwitchPort is the switch side of a host's link: "<host>.<w|l>" when that
// fits the kernel's 15 characters, else "p<index>.<w|l>".
func SwitchPort(host string, i int, seg string) string {
	s := host + "." + seg[:1]
	if len(s) > 15 {
		s = fmt.Sprintf("p%02d.%s", i, seg[:1])
	}
	return s
}
