// Package wgcfg holds the two values that pass between the daemon's state
// and its tunnel engine: the configuration the state wants on the WireGuard
// device (Config) and what the device reports back (Report).
package wgcfg

import (
	"net/netip"
	"slices"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Peer is one cluster's VPN server.
type Peer struct {
	CID        string // for logs only
	PublicKey  wgtypes.Key
	Endpoint   netip.AddrPort
	AllowedIPs []netip.Prefix // the cluster's VPN subnet
	// Probe is where the engine sends a small question through the tunnel
	// when nothing has come back for a while (the cluster's DNS server,
	// which answers at once), so a server that stopped answering shows as
	// silence; invalid: never probed.
	Probe netip.AddrPort
	// Epoch is when the serving gateway last started, as control reports
	// it: when it changes for the same key, the server has forgotten the
	// device's session, and the engine re-handshakes at once.
	Epoch time.Time
	Relay string // the hosting node's relay URL, for networks without UDP ("" none)
}

// Config is the whole wanted state of the tunnel interface.
type Config struct {
	Addresses []netip.Prefix // the device's tunnel address (/32)
	Peers     []Peer         // by cid
	Routes    []netip.Prefix // one per connected cluster's subnet
}

// Equal reports whether c and o configure the same thing.
func (c Config) Equal(o Config) bool {
	return slices.Equal(c.Addresses, o.Addresses) && slices.Equal(c.Routes, o.Routes) &&
		slices.EqualFunc(c.Peers, o.Peers, func(a, b Peer) bool {
			return a.CID == b.CID && a.PublicKey == b.PublicKey && a.Endpoint == b.Endpoint &&
				slices.Equal(a.AllowedIPs, b.AllowedIPs) && a.Probe == b.Probe && a.Epoch.Equal(b.Epoch) && a.Relay == b.Relay
		})
}

// PeerReport is a peer as the device reports it.
type PeerReport struct {
	PublicKey     wgtypes.Key
	Endpoint      netip.AddrPort
	LastHandshake time.Time // zero: never
	AddedAt       time.Time // when the engine configured this peer (for "no handshake yet")
	RxBytes       int64     // received from the peer since it was configured (the device's counter)
	TxBytes       int64     // sent to the peer since it was configured
	// HandshakeAsked is when the engine last (re)created the peer, which
	// sends a handshake initiation at once; a LastHandshake before it means
	// the answer is still awaited.
	HandshakeAsked time.Time
	// HandshakeRetries counts the times the engine re-created the peer
	// because an initiation it sent went unanswered (its nudges), since
	// the engine first configured the peer.
	HandshakeRetries uint64
	// What the engine saw of the traffic on its reads of the counters
	// above: LastReceive when RxBytes last grew, and SentSince when TxBytes
	// first grew after that (zero when nothing was sent since the last
	// receive). Handshake messages and keepalives count both ways.
	LastReceive time.Time
	SentSince   time.Time
	Path        PathReport
}

// PathReport is how a peer's datagrams travel (vpnd/relay decides).
type PathReport struct {
	Path     string    // "direct" (UDP) or "relay"; "" when the engine decides nothing for the peer
	Since    time.Time // when it took this path
	Reason   string    // why
	Relay    string    // the relay's URL ("" none)
	RelayUp  bool      // the relay connection is open
	RelayErr string    // why the relay could not be reached
	Captive  string    // a captive portal holds the network ("portal" when its address is unknown)
}

// Report is what the device says about itself.
type Report struct {
	Interface string
	Up        bool
	PublicKey wgtypes.Key
	Addresses []netip.Prefix
	Peers     []PeerReport
	Err       string // the last failure to create, configure or read the device
	// PathMTU is the smallest MTU on the routes to the peers' endpoints,
	// which the TCP clamp fits (0: not known).
	PathMTU int
}

// Peer returns the reported peer with the given key.
func (r Report) Peer(k wgtypes.Key) (PeerReport, bool) {
	for _, p := range r.Peers {
		if p.PublicKey == k {
			return p, true
		}
	}
	return PeerReport{}, false
}
