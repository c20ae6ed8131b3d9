// Package wgserver is the cluster's WireGuard VPN server on a node: the
// WireGuard host (wghost: a wireguard-go device on a TUN interface, with
// the standard UAPI socket so the stock `wg show` reads it) with the
// devices as its peers, carrying the server's address and routing the
// device pool through itself.
//
// A Server is opened once and then follows Apply calls for as long as the
// node serves: peers, port, address and routes change in place, so the
// interface (and every device's session on it) survives role changes and
// peer churn. Close removes the interface, its address and routes with it.
package wgserver

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/wghost"
)

// Peer is a device the server accepts.
type Peer struct {
	DeviceID  string // for log lines only
	PublicKey wgtypes.Key
	Address   netip.Addr // the device's tunnel address: its one allowed IP (/32)
}

// Spec is what the server must look like.
type Spec struct {
	Port       int          // UDP listen port
	Address    netip.Prefix // the server's address with the subnet's prefix (100.100.1.1/24)
	DevicePool netip.Prefix // routed through the interface, so replies reach devices
	Peers      []Peer
}

// State is what the server looks like, read back from the interface and the
// device (never from what was last asked).
type State struct {
	Index      int  // interface index: stays the same for the server's life
	Listening  bool // interface up and the UDP port bound
	ListenPort int
	// Handshakes holds every peer's latest handshake (zero: none yet).
	Handshakes map[wgtypes.Key]time.Time
	// Traffic holds every peer's byte counters since it was added.
	Traffic map[wgtypes.Key]Traffic
	// Endpoints holds where each peer last sent from (peers with none yet
	// are missing): kept, so a restart can reach the devices first.
	Endpoints map[wgtypes.Key]netip.AddrPort
}

// Traffic is a peer's byte counters, as the device keeps them.
type Traffic struct{ Rx, Tx int64 }

// Server is one serving WireGuard interface (a wghost.Host). Its methods
// may be called from several goroutines.
type Server struct {
	host  *wghost.Host
	name  string
	log   *slog.Logger
	index int

	mu    sync.Mutex
	bound bool                   // the last bring-up bound the UDP port
	names map[wgtypes.Key]string // device ids of the peers, for log lines
}

// Open creates the interface named name with the node's private key, its
// UAPI socket, and a wgctrl client on it. It is down and has no peers until
// the first Apply. On error nothing is left behind.
func Open(name string, key wgtypes.Key, log *slog.Logger) (*Server, error) {
	return OpenWithBind(name, key, nil, log)
}

// OpenWithBind is Open with the Bind wireguard-go runs on (gateway/relay's,
// which adds the relay streams to UDP; nil: UDP only).
func OpenWithBind(name string, key wgtypes.Key, bind conn.Bind, log *slog.Logger) (*Server, error) {
	return OpenWith(name, key, Options{Bind: bind}, log)
}

// Options are what a server may run on besides a plain TUN and UDP.
type Options struct {
	Bind conn.Bind // gateway/relay's (nil: UDP only)
	// WrapTUN, when set, is the TUN as wireguard-go sees it: the access
	// policy's packet filter (gateway/policyfilter).
	WrapTUN func(tun.Device) tun.Device
}

// OpenWith is Open with options.
func OpenWith(name string, key wgtypes.Key, o Options, log *slog.Logger) (*Server, error) {
	h, err := wghost.Open(wghost.Config{Name: name, Key: key, Bind: o.Bind, WrapTUN: o.WrapTUN, Log: log})
	if err != nil {
		return nil, err
	}
	ifc, err := net.InterfaceByName(h.Name())
	if err != nil {
		_ = h.Close()
		return nil, fmt.Errorf("interface %s: %w", h.Name(), err)
	}
	return &Server{host: h, name: h.Name(), log: log, index: ifc.Index, names: map[wgtypes.Key]string{}}, nil
}

// Name is the interface's name.
func (s *Server) Name() string { return s.name }

// Apply makes the server match spec: port and peers in wgctrl's terms (peers
// added, changed and removed one by one, never replaced wholesale), then
// the address, the interface up with the port bound, and the device pool's
// route. It is idempotent; what already matches is left alone.
func (s *Server) Apply(spec Spec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.applyPeers(spec); err != nil {
		return err
	}
	if err := s.host.Net().SetAddresses([]netip.Prefix{spec.Address}); err != nil {
		return err
	}
	if err := s.host.Net().Up(); err != nil {
		return err
	}
	// The TUN's up event brings the device up too, but asynchronously;
	// doing it here makes a failed bind (port taken) an error of this call.
	if err := s.host.Up(); err != nil {
		s.bound = false
		return fmt.Errorf("interface %s: listen on UDP port %d: %w", s.name, spec.Port, err)
	}
	s.bound = true
	if err := s.host.Net().SetRoutes([]netip.Prefix{spec.DevicePool}); err != nil {
		return err
	}
	return nil
}

// ApplyPeers is Apply for a spec whose address and device pool the last
// successful Apply set: the peers (and the port) only. The interface's
// address, link and route are left as they are: reading and setting them
// again takes 0.6–1.9 ms of netlink round trips that change nothing, on
// the path of a joining device, whose answer waits for the report that
// follows (control/server/joinack.go). Every other map's Apply sets them
// again, so a hand-removed address does not outlive the next such map.
func (s *Server) ApplyPeers(spec Spec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyPeers(spec)
}

// applyPeers configures the device's peers and port. s.mu held.
func (s *Server) applyPeers(spec Spec) error {
	d, err := s.host.Device()
	if err != nil {
		return err
	}
	changes := wghost.Diff(wghost.PeersOf(d), peers(spec.Peers))
	cfg := wgtypes.Config{Peers: changes, ReplacePeers: false}
	if d.ListenPort != spec.Port {
		cfg.ListenPort = &spec.Port
	}
	if cfg.ListenPort != nil || len(cfg.Peers) > 0 {
		if err := s.host.Configure(cfg); err != nil {
			s.bound = false
			if cfg.ListenPort != nil && strings.Contains(err.Error(), fmt.Sprintf("errno=%d", ipc.IpcErrorPortInUse)) {
				return fmt.Errorf("interface %s: UDP port %d is already in use on this node (another program holds it)", s.name, spec.Port)
			}
			return fmt.Errorf("interface %s: configure port %d and %d peer changes: %w", s.name, spec.Port, len(changes), err)
		}
	}
	s.logChanges(changes, spec.Peers)
	return nil
}

func (s *Server) logChanges(changes []wgtypes.PeerConfig, want []Peer) {
	byKey := map[wgtypes.Key]Peer{}
	for _, p := range want {
		byKey[p.PublicKey] = p
	}
	for _, c := range changes {
		if c.Remove {
			s.log.Info("peer removed", "device", s.names[c.PublicKey], "key", c.PublicKey.String())
			delete(s.names, c.PublicKey)
			continue
		}
		p := byKey[c.PublicKey]
		verb := "peer added"
		if _, known := s.names[c.PublicKey]; known {
			verb = "peer updated"
		}
		s.names[c.PublicKey] = p.DeviceID
		s.log.Info(verb, "device", p.DeviceID, "key", p.PublicKey.String(), "address", p.Address.String())
	}
}

// State reads the interface and the device.
func (s *Server) State() (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{Index: s.index}
	ifc, err := net.InterfaceByName(s.name)
	if err != nil {
		return st, fmt.Errorf("interface %s: %w", s.name, err)
	}
	st.Index = ifc.Index
	d, err := s.host.Device()
	if err != nil {
		return st, err
	}
	st.ListenPort = d.ListenPort
	// wireguard-go zeroes the port when a bind fails, so an up interface
	// with a port is a bound one.
	st.Listening = s.bound && ifc.Flags&net.FlagUp != 0 && d.ListenPort != 0
	st.Handshakes = make(map[wgtypes.Key]time.Time, len(d.Peers))
	st.Traffic = make(map[wgtypes.Key]Traffic, len(d.Peers))
	st.Endpoints = make(map[wgtypes.Key]netip.AddrPort, len(d.Peers))
	for _, p := range d.Peers {
		st.Handshakes[p.PublicKey] = p.LastHandshakeTime
		st.Traffic[p.PublicKey] = Traffic{Rx: p.ReceiveBytes, Tx: p.TransmitBytes}
		if ep := wghost.PeerOf(p).Endpoint; ep.IsValid() {
			st.Endpoints[p.PublicKey] = ep
		}
	}
	return st, nil
}

// Reach sets the endpoint of each peer that has none yet to where it was
// last seen (a kept map's, after a restart) and sends it a handshake
// initiation at once. A device whose session died with the old server
// would otherwise send into the void until its own handshake retries (5 s
// and more); a peer that already has an endpoint is left alone. Peers not
// on the server are skipped; the first failure is returned.
func (s *Server) Reach(endpoints map[wgtypes.Key]netip.AddrPort) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.host.Device()
	if err != nil {
		return err
	}
	var first error
	for _, p := range d.Peers {
		ep, ok := endpoints[p.PublicKey]
		if !ok || !ep.IsValid() || p.Endpoint != nil {
			continue
		}
		pc := wgtypes.PeerConfig{PublicKey: p.PublicKey, UpdateOnly: true, Endpoint: net.UDPAddrFromAddrPort(ep)}
		if err := s.host.Configure(wgtypes.Config{Peers: []wgtypes.PeerConfig{pc}}); err != nil {
			first = cmp.Or(first, fmt.Errorf("interface %s: set the last endpoint of %s: %w", s.name, s.names[p.PublicKey], err))
			continue
		}
		if err := s.host.Handshake(p.PublicKey); err != nil {
			first = cmp.Or(first, fmt.Errorf("interface %s: handshake with %s: %w", s.name, s.names[p.PublicKey], err))
		}
	}
	return first
}

// Close removes the interface (its address and routes go with it) and the
// UAPI socket.
func (s *Server) Close() error { return s.host.Close() }

// peers are the devices as the host's peers: each allowed its one tunnel
// address, with no endpoint (the device's packets give it) and no
// keepalive (the devices keep the path open).
func peers(ps []Peer) []wghost.Peer {
	out := make([]wghost.Peer, len(ps))
	for i, p := range ps {
		out[i] = wghost.Peer{PublicKey: p.PublicKey, AllowedIPs: allowedIPs(p.Address)}
	}
	return out
}

// allowedIPs are a device's tunnel addresses: its IPv4 one and the IPv6 one
// derived from it (api.DeviceAddr6), the source of what it sends to a
// cluster's mapped range (gateway/reach, issue 21).
func allowedIPs(a netip.Addr) []netip.Prefix {
	a = a.Unmap()
	if !a.Is4() {
		return []netip.Prefix{wghost.HostPrefix(a)}
	}
	return []netip.Prefix{wghost.HostPrefix(a), wghost.HostPrefix(api.DeviceAddr6(a))}
}
