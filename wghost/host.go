// Package wghost is the WireGuard host both ends of RunOS VPN run: the
// daemon on a laptop (vpnd/tunnel) and the gateway on a node
// (gateway/wgserver). A Host is one TUN interface driven by wireguard-go in
// this process, with the standard UAPI socket (so the stock `wg show` reads
// it); the host reads and configures its device in process, in wgctrl's
// types (uapi.go); Diff turns the peers an end wants into the fewest UAPI
// changes (peers.go); Bind is the
// one relay-capable conn.Bind under the device, UDP through wireguard-go's
// own StdNetBind plus relay streams, whose routing each end gives as a
// Policy (bind.go): the gateway multiplexes UDP and many devices' streams
// (gateway/relay), the daemon chooses UDP or the relay per peer
// (vpnd/relay).
//
// It lives at the top level, next to platform/ which it uses, rather than
// under internal/: it is a component with a job of its own (the way
// wireguard-go keeps one device package for every platform), not a helper,
// and both the laptop's and the node's trees import it as a peer of
// dnsplit/ and platform/.
//
// It is not where either end's policy lives: what peers a node accepts,
// when a laptop re-handshakes or falls back to the relay, and the relay's
// HTTP side stay with the daemon and the gateway.
package wghost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/platform"
)

// DefaultMTU is WireGuard's usual MTU over a 1500-byte path.
const DefaultMTU = device.DefaultMTU

// Config is what Open needs.
type Config struct {
	Name string      // the interface's name (macOS picks utunN itself)
	Key  wgtypes.Key // the host's private key
	MTU  int         // 0: DefaultMTU
	// Bind is what wireguard-go sends and receives through; nil:
	// conn.NewDefaultBind() (UDP only).
	Bind conn.Bind
	// WrapTUN, when set, is the TUN as wireguard-go sees it (the daemon
	// clamps TCP MSS there).
	WrapTUN func(tun.Device) tun.Device
	Log     *slog.Logger
}

// Host is one WireGuard interface. Its methods may be called from several
// goroutines; Close once.
type Host struct {
	name string
	tun  tun.Device
	dev  *device.Device
	uapi net.Listener
	net  platform.TunnelNet
	key  keyPair
}

// Open creates the interface, starts wireguard-go on it with the UAPI
// socket and the key, and opens the platform's address and route control
// of it. It is down and has no peers. On failure nothing is left behind.
func Open(cfg Config) (_ *Host, err error) {
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.Bind == nil {
		cfg.Bind = conn.NewDefaultBind()
	}
	h := &Host{name: cfg.Name, key: keyPair{cfg.Key, cfg.Key.PublicKey()}}
	defer func() {
		if err != nil {
			_ = h.Close()
		}
	}()
	h.tun, err = tun.CreateTUN(platform.TunnelDeviceName(cfg.Name), cfg.MTU)
	if err != nil {
		return nil, fmt.Errorf("create interface %s: %w", cfg.Name, err)
	}
	if real, nerr := h.tun.Name(); nerr == nil {
		h.name = real
	}
	td := h.tun
	if cfg.WrapTUN != nil {
		td = cfg.WrapTUN(td)
	}
	h.dev = device.NewDevice(td, cfg.Bind, logger(cfg.Log))
	if h.uapi, err = listenUAPI(h.name); err != nil {
		return nil, fmt.Errorf("interface %s: UAPI socket: %w", h.name, err)
	}
	go h.serveUAPI()
	if err = h.Configure(wgtypes.Config{PrivateKey: &cfg.Key, ReplacePeers: true}); err != nil {
		return nil, fmt.Errorf("interface %s: set the private key: %w", h.name, err)
	}
	if h.net, err = platform.OpenTunnelNet(h.name); err != nil {
		return nil, err
	}
	return h, nil
}

// Name is the interface's name.
func (h *Host) Name() string { return h.name }

// Net sets the interface's addresses and routes and brings it up.
func (h *Host) Net() platform.TunnelNet { return h.net }

// serveUAPI answers `wg` and wgctrl on the UAPI socket until it is closed.
func (h *Host) serveUAPI() {
	for {
		c, err := h.uapi.Accept()
		if err != nil {
			return
		}
		go h.dev.IpcHandle(c)
	}
}

// Device reads the device (its port, peers, handshakes and counters) as
// wgctrl and `wg show` do.
func (h *Host) Device() (*wgtypes.Device, error) {
	d, err := readDevice(h.dev, h.name, &h.key)
	if err != nil {
		return nil, fmt.Errorf("interface %s: read device: %w", h.name, err)
	}
	return d, nil
}

// Configure applies cfg in one UAPI transaction.
func (h *Host) Configure(cfg wgtypes.Config) error { return configure(h.dev, cfg) }

// Up brings wireguard-go up, binding its port now: a port that cannot be
// bound is this call's error (the TUN's own up event would do it too, but
// later and silently).
func (h *Host) Up() error { return h.dev.Up() }

// Handshake sends a handshake initiation to the peer with key now
// (wireguard-go sends at most one per peer every 5 s).
func (h *Host) Handshake(key wgtypes.Key) error {
	peer := h.dev.LookupPeer(device.NoisePublicKey(key))
	if peer == nil {
		return fmt.Errorf("no peer %s on %s", key, h.name)
	}
	return peer.SendHandshakeInitiation(false)
}

// Keepalive sends the peer a keepalive now (wireguard-go's own, through
// its send queue: nothing goes when it has no session keys).
func (h *Host) Keepalive(key wgtypes.Key) error {
	peer := h.dev.LookupPeer(device.NoisePublicKey(key))
	if peer == nil {
		return fmt.Errorf("no peer %s on %s", key, h.name)
	}
	peer.SendKeepalive()
	return nil
}

// WireGuard is the wireguard-go device itself, for what UAPI does not say
// (a test that watches wireguard-go release a removed peer).
func (h *Host) WireGuard() *device.Device { return h.dev }

// BindUpdate closes and re-opens the Bind's sockets (the network changed:
// replies must leave from the new address).
func (h *Host) BindUpdate() error { return h.dev.BindUpdate() }

// Close removes the interface, its address and routes with it, and the
// UAPI socket. It also closes the Bind (wireguard-go closes it with the
// device).
func (h *Host) Close() error {
	var errs []error
	if h.uapi != nil {
		errs = append(errs, ignoreClosed(h.uapi.Close()))
	}
	switch {
	case h.dev != nil:
		h.dev.Close() // closes the TUN: on Linux the kernel deletes the interface
	case h.tun != nil:
		errs = append(errs, h.tun.Close())
	}
	if h.tun != nil {
		errs = append(errs, platform.DeleteInterface(h.name))
	}
	return errors.Join(errs...)
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// logger sends wireguard-go's chatter to debug and its errors to warn.
// wireguard-go never logs keys, only peers' abbreviated public keys;
// nothing is learnt from its wording (handshakes and traffic are read from
// the device).
func logger(log *slog.Logger) *device.Logger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
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
