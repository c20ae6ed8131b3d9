// Package tunnel runs the daemon's WireGuard interface: the WireGuard host
// (wghost: a TUN device driven by wireguard-go in this process, with the
// standard UAPI socket, so the stock `wg show wg1` reads it, through which
// the engine configures the device with wgctrl) with the clusters' VPN
// servers as its peers. Apply makes the device match a wgcfg.Config (the
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
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/vpnd/relay"
	"github.com/runos/vpn/vpnd/wgcfg"
	"github.com/runos/vpn/wghost"
)

const (
	// DefaultMTU is WireGuard's usual MTU over a 1500-byte path.
	DefaultMTU = wghost.DefaultMTU
	// keepalive keeps NAT mappings open and, because every keepalive goes
	// through the send path, makes wireguard-go re-handshake every two
	// minutes: peerUp (a handshake within 180 s) then holds while the
	// server answers. Turning it on for a new peer also sends the first
	// packet at once, so the handshake starts without waiting for traffic.
	keepalive = 25 * time.Second
)

// Engine is one running tunnel interface: a wghost.Host and what the
// daemon adds to it.
type Engine struct {
	log  *slog.Logger
	name string
	now  func() time.Time
	mtu  int

	host  *wghost.Host
	clamp *clampTUN   // the TUN as wireguard-go sees it: clamps TCP MSS to the uplink (mss.go)
	bind  *relay.Bind // UDP, or a cluster's relay where UDP gets no answer (relay.go)

	mu      sync.Mutex
	closed  bool
	applied wgcfg.Config
	peers   map[wgtypes.Key]*tracked // peers this engine configured (liveness.go)
	probe   *prober                  // opened at the first probe

	// The MSS clamp's inputs and result (mss.go).
	routeMTU   func(netip.Addr) (int, error) // Options.RouteMTU
	uplinkMTU  int                           // SetUplinkMTU's fallback
	clampedFor []netip.Addr                  // the endpoints the clamp was set for
	pathMTU    int                           // the MTU it was set for (0: unknown)
}

// New creates the interface name (wg1), starts wireguard-go on it with key
// and the UAPI socket, and brings it up with no peers. On failure nothing is
// left behind.
func New(name string, key wgtypes.Key, log *slog.Logger) (*Engine, error) {
	return NewWith(name, key, log, Options{})
}

// NewWith is New with Options.
func NewWith(name string, key wgtypes.Key, log *slog.Logger, opt Options) (_ *Engine, err error) {
	e := &Engine{log: log, name: name, now: time.Now, peers: map[wgtypes.Key]*tracked{}, routeMTU: opt.RouteMTU}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	e.mtu = opt.MTU
	if e.mtu == 0 {
		e.mtu = DefaultMTU
	}
	e.bind = e.newBind(key, opt)
	e.host, err = wghost.Open(wghost.Config{Name: name, Key: key, MTU: e.mtu, Bind: e.bind, Log: log,
		WrapTUN: func(t tun.Device) tun.Device {
			e.clamp = &clampTUN{Device: t}
			return e.clamp
		}})
	if err != nil {
		return nil, fmt.Errorf("tunnel %s: %w", name, err)
	}
	e.name = e.host.Name() // macOS picks utunN itself
	if err = e.host.Up(); err != nil {
		return nil, fmt.Errorf("tunnel %s: bring wireguard up: %w", e.name, err)
	}
	if err = e.host.Net().Up(); err != nil {
		return nil, err
	}
	log.Info("tunnel up", "interface", e.name, "publicKey", key.PublicKey().String())
	return e, nil
}

// Name is the interface's name.
func (e *Engine) Name() string { return e.name }

// Apply makes the device match cfg: peers first, in one UAPI transaction
// (a moved server's old key goes and its new key comes with the same
// allowed IPs), so that a new peer's handshake is under way while the
// interface's addresses and then its routes (which need the addresses)
// are set: a handshake needs neither, and a connect waited for both.
func (e *Engine) Apply(cfg wgcfg.Config) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("tunnel closed")
	}
	// The Bind knows each peer's destination before its first handshake,
	// so that handshake's answer counts for the path decision.
	e.bind.SetDests(dests(cfg))
	dev, err := e.host.Device()
	if err != nil {
		return err
	}
	pcs, added, restarted, removed := e.peerChanges(dev, cfg)
	// A restarted server's path is decided again before its peer is
	// re-created below, so that the new initiation races UDP and the
	// relay as a connect's does rather than going the way chosen while
	// the server was down.
	e.bind.ServerRestarted(restarted...)
	if len(pcs) > 0 {
		if err := e.host.Configure(wgtypes.Config{Peers: pcs}); err != nil {
			return fmt.Errorf("configure peers on %s: %w", e.name, err)
		}
	}
	net := e.host.Net()
	if err := net.SetAddresses(cfg.Addresses); err != nil {
		return err
	}
	if err := net.SetRoutes(cfg.Routes); err != nil {
		return err
	}
	if len(added) > 0 || removed > 0 {
		e.log.Info("peers configured", "interface", e.name, "added", added, "removed", removed, "peers", len(cfg.Peers))
	}
	if len(restarted) > 0 {
		e.log.Info("VPN server restarted: handshaking again now", "interface", e.name, "clusters", restarted)
	}
	e.applied = cfg
	e.reclamp(false)
	return nil
}

// peerChanges is what makes the device's peers cfg's: wghost.Diff against
// what this engine last applied (an endpoint the device learnt since is no
// change), and a re-creation of each peer whose server restarted with the
// same key (a new epoch) and has forgotten this device's session: a fresh
// handshake now, not when WireGuard's timers notice (10-15 s). It starts
// tracking added peers and forgets removed ones. e.mu held.
func (e *Engine) peerChanges(dev *wgtypes.Device, cfg wgcfg.Config) (pcs []wgtypes.PeerConfig, added, restarted []string, removed int) {
	before := map[wgtypes.Key]wgcfg.Peer{}
	for _, p := range e.applied.Peers {
		before[p.PublicKey] = p
	}
	have := make([]wghost.Peer, 0, len(dev.Peers))
	onDevice := map[wgtypes.Key]bool{}
	for _, p := range dev.Peers {
		onDevice[p.PublicKey] = true
		if old, ok := before[p.PublicKey]; ok {
			have = append(have, hostPeer(old))
		} else {
			have = append(have, wghost.PeerOf(p))
		}
	}
	want := make([]wghost.Peer, 0, len(cfg.Peers))
	byKey := map[wgtypes.Key]wgcfg.Peer{}
	var restart []wgcfg.Peer
	for _, p := range cfg.Peers {
		want = append(want, hostPeer(p))
		byKey[p.PublicKey] = p
		if old, had := before[p.PublicKey]; had && onDevice[p.PublicKey] && !old.Epoch.Equal(p.Epoch) {
			restart = append(restart, p)
		}
	}
	now := e.now()
	for _, pc := range wghost.Diff(have, want) {
		switch {
		case slices.ContainsFunc(restart, func(p wgcfg.Peer) bool { return p.PublicKey == pc.PublicKey }):
			continue // re-created below
		case pc.Remove:
			removed++
		case !pc.UpdateOnly:
			e.peers[pc.PublicKey] = newTracked(now)
			added = append(added, byKey[pc.PublicKey].CID)
		}
		pcs = append(pcs, pc)
	}
	for _, p := range restart {
		pcs = append(pcs, e.recreate(p, now)...)
		restarted = append(restarted, p.CID)
	}
	for k := range e.peers {
		if _, ok := byKey[k]; !ok {
			delete(e.peers, k)
		}
	}
	return pcs, added, restarted, removed
}

// hostPeer is a cluster's VPN server as the host's peer.
func hostPeer(p wgcfg.Peer) wghost.Peer {
	return wghost.Peer{PublicKey: p.PublicKey, Endpoint: p.Endpoint, AllowedIPs: p.AllowedIPs, Keepalive: keepalive}
}

// Traffic is each peer's received plus sent bytes, as the device counts
// them. Unlike Read it does not observe the peers (their liveness is
// judged from the reads the daemon makes for that), so a watcher may call
// it as often as it likes.
func (e *Engine) Traffic() (map[wgtypes.Key]uint64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("the tunnel is closed")
	}
	dev, err := e.host.Device()
	if err != nil {
		return nil, err
	}
	m := make(map[wgtypes.Key]uint64, len(dev.Peers))
	for _, p := range dev.Peers {
		m[p.PublicKey] = uint64(max(p.ReceiveBytes, 0)) + uint64(max(p.TransmitBytes, 0))
	}
	return m, nil
}

// Read reports the device as wgctrl reads it.
func (e *Engine) Read() wgcfg.Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := wgcfg.Report{Interface: e.name, Up: !e.closed, Addresses: slices.Clone(e.applied.Addresses), PathMTU: e.pathMTU}
	if e.closed {
		return r
	}
	dev, err := e.host.Device()
	if err != nil {
		r.Err = err.Error()
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
			pr.HandshakeRetries = t.retries
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
	errs := []error{
		e.host.Configure(wgtypes.Config{ReplacePeers: true}),
		e.host.Net().SetRoutes(nil), e.host.Net().SetAddresses(nil),
		e.close(),
	}
	if errs[0] != nil {
		errs[0] = fmt.Errorf("remove peers: %w", errs[0])
	}
	e.log.Info("tunnel down", "interface", e.name)
	return errors.Join(errs...)
}

// close releases what NewWith made, in reverse: the host (the TUN device
// goes with the wireguard device), then the Bind's relay connections.
func (e *Engine) close() error {
	var err error
	if e.probe != nil {
		e.probe.close()
	}
	if e.host != nil {
		err = e.host.Close()
	}
	if e.bind != nil {
		e.bind.Stop()
	}
	return err
}
