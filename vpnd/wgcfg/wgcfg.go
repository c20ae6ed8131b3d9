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
	Relay      string         // the hosting node's relay URL, for networks without UDP ("" none)
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
				slices.Equal(a.AllowedIPs, b.AllowedIPs) && a.Relay == b.Relay
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
	Path          PathReport
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
