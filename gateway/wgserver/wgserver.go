// Package wgserver is the cluster's WireGuard VPN server on a node: one
// wireguard-go device on a TUN interface, with the standard UAPI socket (so
// the stock `wg show` reads it), configured through wgctrl, carrying the
// server's address and routing the device pool through itself.
//
// A Server is opened once and then follows Apply calls for as long as the
// node serves: peers, port, address and routes change in place, so the
// interface (and every device's session on it) survives role changes and
// peer churn. Close removes the interface, its address and routes with it.
package wgserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/platform"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
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
}

// Traffic is a peer's byte counters, as the device keeps them.
type Traffic struct{ Rx, Tx int64 }

// Server is one serving WireGuard interface. Its methods may be called from
// several goroutines.
type Server struct {
	name string
	log  *slog.Logger

	dev   *device.Device
	uapi  net.Listener
	wg    *wgctrl.Client
	tnet  platform.TunnelNet
	index int

	mu    sync.Mutex
	bound bool                   // the last bring-up bound the UDP port
	names map[wgtypes.Key]string // device ids of the peers, for log lines
}

// Open creates the interface named name with the node's private key, its
// UAPI socket, and a wgctrl client on it. It is down and has no peers until
// the first Apply. On error nothing is left behind.
func Open(name string, key wgtypes.Key, log *slog.Logger) (*Server, error) {
	return OpenWithBind(name, key, conn.NewDefaultBind(), log)
}

// OpenWithBind is Open with the Bind wireguard-go runs on (gateway/relay's,
// which adds the relay streams to UDP).
func OpenWithBind(name string, key wgtypes.Key, bind conn.Bind, log *slog.Logger) (_ *Server, err error) {
	tdev, err := tun.CreateTUN(name, device.DefaultMTU)
	if err != nil {
		return nil, fmt.Errorf("create interface %s: %w", name, err)
	}
	if real, err := tdev.Name(); err == nil {
		name = real
	}
	s := &Server{name: name, log: log, names: map[wgtypes.Key]string{}}
	s.dev = device.NewDevice(tdev, bind, wgLogger(log))
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.uapi, err = listenUAPI(name); err != nil {
		return nil, fmt.Errorf("interface %s: UAPI socket: %w", name, err)
	}
	go s.serveUAPI()
	if s.wg, err = wgctrl.New(); err != nil {
		return nil, fmt.Errorf("interface %s: wgctrl: %w", name, err)
	}
	if err = s.wg.ConfigureDevice(name, wgtypes.Config{PrivateKey: &key}); err != nil {
		return nil, fmt.Errorf("interface %s: set private key: %w", name, err)
	}
	if s.tnet, err = platform.OpenTunnelNet(name); err != nil {
		return nil, err
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	s.index = ifc.Index
	return s, nil
}

// Name is the interface's name.
func (s *Server) Name() string { return s.name }

// serveUAPI answers `wg` and wgctrl on the UAPI socket until it is closed.
func (s *Server) serveUAPI() {
	for {
		c, err := s.uapi.Accept()
		if err != nil {
			return
		}
		go s.dev.IpcHandle(c)
	}
}

// Apply makes the server match spec: port and peers through wgctrl (peers
// added, changed and removed one by one, never replaced wholesale), then
// the address, the interface up with the port bound, and the device pool's
// route. It is idempotent; what already matches is left alone.
func (s *Server) Apply(spec Spec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.wg.Device(s.name)
	if err != nil {
		return fmt.Errorf("interface %s: read device: %w", s.name, err)
	}
	changes := peerChanges(d.Peers, spec.Peers)
	cfg := wgtypes.Config{Peers: changes, ReplacePeers: false}
	if d.ListenPort != spec.Port {
		cfg.ListenPort = &spec.Port
	}
	if cfg.ListenPort != nil || len(cfg.Peers) > 0 {
		if err := s.wg.ConfigureDevice(s.name, cfg); err != nil {
			s.bound = false
			if cfg.ListenPort != nil && strings.Contains(err.Error(), fmt.Sprintf("errno=%d", ipc.IpcErrorPortInUse)) {
				return fmt.Errorf("interface %s: UDP port %d is already in use on this node (another program holds it)", s.name, spec.Port)
			}
			return fmt.Errorf("interface %s: configure port %d and %d peer changes: %w", s.name, spec.Port, len(changes), err)
		}
	}
	s.logChanges(changes, spec.Peers)
	if err := s.tnet.SetAddresses([]netip.Prefix{spec.Address}); err != nil {
		return err
	}
	if err := s.tnet.Up(); err != nil {
		return err
	}
	// The TUN's up event brings the device up too, but asynchronously;
	// doing it here makes a failed bind (port taken) an error of this call.
	if err := s.dev.Up(); err != nil {
		s.bound = false
		return fmt.Errorf("interface %s: listen on UDP port %d: %w", s.name, spec.Port, err)
	}
	s.bound = true
	if err := s.tnet.SetRoutes([]netip.Prefix{spec.DevicePool}); err != nil {
		return err
	}
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
	d, err := s.wg.Device(s.name)
	if err != nil {
		return st, fmt.Errorf("interface %s: read device: %w", s.name, err)
	}
	st.ListenPort = d.ListenPort
	// wireguard-go zeroes the port when a bind fails, so an up interface
	// with a port is a bound one.
	st.Listening = s.bound && ifc.Flags&net.FlagUp != 0 && d.ListenPort != 0
	st.Handshakes = make(map[wgtypes.Key]time.Time, len(d.Peers))
	st.Traffic = make(map[wgtypes.Key]Traffic, len(d.Peers))
	for _, p := range d.Peers {
		st.Handshakes[p.PublicKey] = p.LastHandshakeTime
		st.Traffic[p.PublicKey] = Traffic{Rx: p.ReceiveBytes, Tx: p.TransmitBytes}
	}
	return st, nil
}

// Close removes the interface (its address and routes go with it) and the
// UAPI socket.
func (s *Server) Close() error {
	var errs []error
	if s.uapi != nil {
		errs = append(errs, s.uapi.Close())
	}
	if s.wg != nil {
		errs = append(errs, s.wg.Close())
	}
	s.dev.Close() // closes the TUN: the kernel deletes the interface
	return errors.Join(errs...)
}

// peerChanges is the per-peer difference between the device's peers and
// the wanted ones: additions and allowed-IP changes (ReplaceAllowedIPs, a
// /32 and a /128 each) and removals. Unchanged peers are not touched, so their
// sessions are never reset.
func peerChanges(have []wgtypes.Peer, want []Peer) []wgtypes.PeerConfig {
	haveBy := make(map[wgtypes.Key]wgtypes.Peer, len(have))
	for _, p := range have {
		haveBy[p.PublicKey] = p
	}
	var out []wgtypes.PeerConfig
	wanted := make(map[wgtypes.Key]bool, len(want))
	for _, p := range want {
		wanted[p.PublicKey] = true
		ipns := allowedIPs(p.Address)
		if h, ok := haveBy[p.PublicKey]; ok && len(h.AllowedIPs) == len(ipns) && sameNet(h.AllowedIPs[0], ipns[0]) && sameNet(h.AllowedIPs[1], ipns[1]) {
			continue
		}
		out = append(out, wgtypes.PeerConfig{PublicKey: p.PublicKey, ReplaceAllowedIPs: true, AllowedIPs: ipns})
	}
	for _, h := range have {
		if !wanted[h.PublicKey] {
			out = append(out, wgtypes.PeerConfig{PublicKey: h.PublicKey, Remove: true})
		}
	}
	return out
}

// allowedIPs are a device's tunnel addresses: its IPv4 one, and the IPv6
// one derived from it (api.DeviceAddr6), the source of what it sends to a
// cluster's mapped range (gateway/reach, issue 21).
func allowedIPs(a netip.Addr) []net.IPNet {
	return []net.IPNet{hostNet(a), hostNet(api.DeviceAddr6(a.Unmap()))}
}

func hostNet(a netip.Addr) net.IPNet {
	a = a.Unmap()
	return net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}

func sameNet(a, b net.IPNet) bool {
	return a.IP.Equal(b.IP) && a.Mask.String() == b.Mask.String()
}

// wgLogger sends wireguard-go's own lines to the log at debug level (its
// errors at warn), tagged so they are told apart from the gateway's.
func wgLogger(log *slog.Logger) *device.Logger {
	l := log.With("from", "wireguard-go")
	return &device.Logger{
		Verbosef: func(format string, args ...any) { l.Debug(fmt.Sprintf(format, args...)) },
		Errorf:   func(format string, args ...any) { l.Warn(fmt.Sprintf(format, args...)) },
	}
}
