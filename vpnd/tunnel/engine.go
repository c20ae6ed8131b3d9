// Package tunnel runs the daemon's WireGuard interface: a TUN device driven
// by wireguard-go in this process, with the standard UAPI socket (so the
// stock `wg show wg1` reads it) through which the engine itself configures
// the device with wgctrl. Apply makes the device match a wgcfg.Config (the
// device address, one peer and one route per connected cluster), Read
// reports what the device says (each peer's last handshake and its traffic
// counters, read through wgctrl, never from wireguard-go's log), and the
// daemon's reads drive the few things the engine does on its own: Nudge
// (a new peer's first handshake, nudge.go), Probe (a question sent through
// a silent tunnel, liveness.go) and Rehandshake (a fresh handshake now).
//
// It is not where status is decided: vpnd/state derives peerUp from what
// Read reports.
package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/relay"
	"github.com/runos/vpn/vpnd/wgcfg"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

const (
	// DefaultMTU is WireGuard's usual MTU over a 1500-byte path.
	DefaultMTU = 1420
	// keepalive keeps NAT mappings open and, because every keepalive goes
	// through the send path, makes wireguard-go re-handshake every two
	// minutes: peerUp (a handshake within 180 s) then holds while the
	// server answers. Turning it on for a new peer also sends the first
	// packet at once, so the handshake starts without waiting for traffic.
	keepalive = 25 * time.Second
)

// Engine is one running tunnel interface.
type Engine struct {
	log  *slog.Logger
	name string
	now  func() time.Time
	mtu  int

	tun   tun.Device
	clamp *clampTUN   // the TUN as wireguard-go sees it: clamps TCP MSS to the uplink (mss.go)
	bind  *relay.Bind // UDP, or a cluster's relay where UDP gets no answer (relay.go)
	dev   *device.Device
	uapi  net.Listener
	wg    *wgctrl.Client
	net   platform.TunnelNet

	mu      sync.Mutex
	closed  bool
	applied wgcfg.Config
	peers   map[wgtypes.Key]*tracked // peers this engine configured (liveness.go)
	probe   *prober                  // opened at the first probe
}

// New creates the interface name (wg1), starts wireguard-go on it with key
// and the UAPI socket, and brings it up with no peers. On failure nothing is
// left behind.
func New(name string, key wgtypes.Key, log *slog.Logger) (*Engine, error) {
	return NewWith(name, key, log, Options{})
}

// NewWith is New with Options.
func NewWith(name string, key wgtypes.Key, log *slog.Logger, opt Options) (_ *Engine, err error) {
	e := &Engine{log: log, name: name, now: time.Now, peers: map[wgtypes.Key]*tracked{}}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	e.mtu = opt.MTU
	if e.mtu == 0 {
		e.mtu = DefaultMTU
	}
	e.tun, err = tun.CreateTUN(platform.TunnelDeviceName(name), e.mtu)
	if err != nil {
		return nil, fmt.Errorf("create tunnel interface %s: %w", name, err)
	}
	if real, nerr := e.tun.Name(); nerr == nil {
		e.name = real // macOS picks utunN itself
	}
	e.clamp = &clampTUN{Device: e.tun}
	e.bind = e.newBind(key, opt)
	e.dev = device.NewDevice(e.clamp, e.bind, e.wgLogger(log))
	e.uapi, err = uapiListen(e.name)
	if err != nil {
		return nil, fmt.Errorf("tunnel %s: UAPI socket: %w", e.name, err)
	}
	go e.serveUAPI()
	e.wg, err = wgctrl.New()
	if err != nil {
		return nil, fmt.Errorf("tunnel %s: wgctrl: %w", e.name, err)
	}
	if err = e.wg.ConfigureDevice(e.name, wgtypes.Config{PrivateKey: &key, ReplacePeers: true}); err != nil {
		return nil, fmt.Errorf("tunnel %s: set the device key: %w", e.name, err)
	}
	if err = e.dev.Up(); err != nil {
		return nil, fmt.Errorf("tunnel %s: bring wireguard up: %w", e.name, err)
	}
	e.net, err = platform.OpenTunnelNet(e.name)
	if err != nil {
		return nil, err
	}
	if err = e.net.Up(); err != nil {
		return nil, err
	}
	log.Info("tunnel up", "interface", e.name, "publicKey", key.PublicKey().String())
	return e, nil
}

// Name is the interface's name.
func (e *Engine) Name() string { return e.name }

func (e *Engine) serveUAPI() {
	for {
		c, err := e.uapi.Accept()
		if err != nil {
			return
		}
		go e.dev.IpcHandle(c)
	}
}

// wgLogger sends wireguard-go's chatter to debug and its errors to warn.
// wireguard-go never logs keys, only peers' abbreviated public keys.
// Nothing is learnt from the wording: handshakes and traffic are read from
// the device.
func (e *Engine) wgLogger(log *slog.Logger) *device.Logger {
	l := log.With("component", "wireguard")
	return &device.Logger{
		Verbosef: func(f string, a ...any) {
			if l.Enabled(context.Background(), slog.LevelDebug) {
				l.Debug(fmt.Sprintf(f, a...))
			}
		},
		Errorf: func(f string, a ...any) { l.Warn(fmt.Sprintf(f, a...)) },
	}
}

// Apply makes the device match cfg: addresses first (routes need them),
// then peers in one UAPI transaction (a moved server's old key goes and
// its new key comes with the same allowed IPs), then routes.
func (e *Engine) Apply(cfg wgcfg.Config) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("tunnel closed")
	}
	if err := e.net.SetAddresses(cfg.Addresses); err != nil {
		return err
	}
	// The Bind knows each peer's destination before its first handshake,
	// so that handshake's answer counts for the path decision.
	e.bind.SetDests(dests(cfg))
	dev, err := e.wg.Device(e.name)
	if err != nil {
		return fmt.Errorf("read %s: %w", e.name, err)
	}
	onDevice := map[wgtypes.Key]bool{}
	for _, p := range dev.Peers {
		onDevice[p.PublicKey] = true
	}
	before := map[wgtypes.Key]wgcfg.Peer{}
	for _, p := range e.applied.Peers {
		before[p.PublicKey] = p
	}
	want := map[wgtypes.Key]bool{}
	var pcs []wgtypes.PeerConfig
	removed := 0
	for k := range onDevice {
		if !slices.ContainsFunc(cfg.Peers, func(p wgcfg.Peer) bool { return p.PublicKey == k }) {
			pcs = append(pcs, wgtypes.PeerConfig{PublicKey: k, Remove: true})
			removed++
		}
	}
	now := e.now()
	var added, restarted []string
	for _, p := range cfg.Peers {
		want[p.PublicKey] = true
		old, had := before[p.PublicKey]
		switch {
		case !onDevice[p.PublicKey]:
			pcs = append(pcs, addPeer(p))
			e.peers[p.PublicKey] = newTracked(now)
			added = append(added, p.CID)
		case had && !old.Epoch.Equal(p.Epoch):
			// The server restarted with the same key and has forgotten
			// this device's session: a fresh handshake now, not when
			// WireGuard's timers notice (10-15 s).
			pcs = append(pcs, e.recreate(p, now)...)
			restarted = append(restarted, p.CID)
		case !had || old.Endpoint != p.Endpoint || !slices.Equal(old.AllowedIPs, p.AllowedIPs):
			pc := addPeer(p)
			pc.UpdateOnly = true
			pcs = append(pcs, pc)
		}
	}
	for k := range e.peers {
		if !want[k] {
			delete(e.peers, k)
		}
	}
	if len(pcs) > 0 {
		if err := e.wg.ConfigureDevice(e.name, wgtypes.Config{Peers: pcs}); err != nil {
			return fmt.Errorf("configure peers on %s: %w", e.name, err)
		}
	}
	if err := e.net.SetRoutes(cfg.Routes); err != nil {
		return err
	}
	if len(added) > 0 || removed > 0 {
		e.log.Info("peers configured", "interface", e.name, "added", added, "removed", removed, "peers", len(cfg.Peers))
	}
	if len(restarted) > 0 {
		e.log.Info("VPN server restarted: handshaking again now", "interface", e.name, "clusters", restarted)
	}
	e.applied = cfg
	return nil
}

func addPeer(p wgcfg.Peer) wgtypes.PeerConfig {
	ka := keepalive
	return wgtypes.PeerConfig{
		PublicKey:                   p.PublicKey,
		Endpoint:                    net.UDPAddrFromAddrPort(p.Endpoint),
		ReplaceAllowedIPs:           true,
		AllowedIPs:                  ipNets(p.AllowedIPs),
		PersistentKeepaliveInterval: &ka,
	}
}

func ipNets(ps []netip.Prefix) []net.IPNet {
	out := make([]net.IPNet, len(ps))
	for i, p := range ps {
		out[i] = net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
	}
	return out
}

// Read reports the device as wgctrl reads it.
func (e *Engine) Read() wgcfg.Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := wgcfg.Report{Interface: e.name, Up: !e.closed, Addresses: slices.Clone(e.applied.Addresses)}
	if e.closed {
		return r
	}
	dev, err := e.wg.Device(e.name)
	if err != nil {
		r.Err = fmt.Sprintf("read %s: %v", e.name, err)
		return r
	}
	r.PublicKey = dev.PublicKey
	paths := e.paths()
	now := e.now()
	for _, p := range dev.Peers {
		pr := wgcfg.PeerReport{PublicKey: p.PublicKey, LastHandshake: p.LastHandshakeTime, RxBytes: p.ReceiveBytes, TxBytes: p.TransmitBytes}
		if p.Endpoint != nil {
			pr.Endpoint = p.Endpoint.AddrPort()
		}
		if t, ok := e.peers[p.PublicKey]; ok {
			t.observe(now, uint64(max(pr.RxBytes, 0)), uint64(max(pr.TxBytes, 0)))
			pr.AddedAt, pr.HandshakeAsked, pr.LastReceive, pr.SentSince = t.addedAt, t.askedAt, t.lastRx, t.sentSince
		}
		pr.Path = paths[p.PublicKey]
		r.Peers = append(r.Peers, pr)
	}
	slices.SortFunc(r.Peers, func(a, b wgcfg.PeerReport) int { return bytes.Compare(a.PublicKey[:], b.PublicKey[:]) })
	return r
}

// Close removes every peer, route and address and the interface itself.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	var errs []error
	if e.wg != nil {
		if err := e.wg.ConfigureDevice(e.name, wgtypes.Config{ReplacePeers: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove peers: %w", err))
		}
	}
	if e.net != nil {
		errs = append(errs, e.net.SetRoutes(nil), e.net.SetAddresses(nil))
	}
	errs = append(errs, e.close())
	e.log.Info("tunnel down", "interface", e.name)
	return errors.Join(errs...)
}

// close releases what New made, in reverse; the TUN device goes with the
// wireguard device (on Linux the interface disappears with its last fd).
func (e *Engine) close() error {
	var errs []error
	if e.probe != nil {
		e.probe.close()
	}
	if e.uapi != nil {
		errs = append(errs, ignoreClosed(e.uapi.Close()))
	}
	if e.wg != nil {
		errs = append(errs, e.wg.Close())
	}
	if e.dev != nil {
		e.dev.Close()
	} else if e.tun != nil {
		errs = append(errs, e.tun.Close())
	}
	if e.bind != nil {
		e.bind.Stop() // its relay connections
	}
	if e.tun != nil {
		errs = append(errs, platform.DeleteInterface(e.name))
	}
	return errors.Join(errs...)
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
