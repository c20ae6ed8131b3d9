//go:build linux

package labbench

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// ProbeConfig tells the handshake probe what to handshake with.
type ProbeConfig struct {
	Interface     string         `json:"interface"` // TUN device to create (unique per run)
	PrivateKey    string         `json:"privateKey"`
	PeerPublicKey string         `json:"peerPublicKey"`
	Endpoint      netip.AddrPort `json:"endpoint"`
	AllowedIP     netip.Prefix   `json:"allowedIp"`
	Rounds        int            `json:"rounds"`
	// Spacing separates rounds: a WireGuard responder drops an initiation
	// from the same peer within 20 ms of the last (flood protection).
	Spacing time.Duration `json:"spacing"`
	Timeout time.Duration `json:"timeout"` // per handshake
}

// ProbeResult is each round's time from configuring the peer to the
// completed handshake, as wireguard-go stamped it.
type ProbeResult struct {
	HandshakesMs []float64 `json:"handshakesMs"`
}

// Handshakes measures the bare handshake floor: in this process (run in
// the laptop's namespaces), a wireguard-go device with no daemon around
// it adds the peer and sends a keepalive, and each round's sample runs
// from the configuration to the moment the handshake completed (the
// device's own timestamp, so polling for it adds nothing). The peer is
// removed and added again between rounds, so every round is a fresh
// initiation and response: one UDP round trip plus the Noise handshake
// on both ends.
func Handshakes(ctx context.Context, cfg ProbeConfig) (ProbeResult, error) {
	var res ProbeResult
	priv, err := wgtypes.ParseKey(cfg.PrivateKey)
	if err != nil {
		return res, fmt.Errorf("probe private key: %w", err)
	}
	peer, err := wgtypes.ParseKey(cfg.PeerPublicKey)
	if err != nil {
		return res, fmt.Errorf("probe peer key: %w", err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	td, err := tun.CreateTUN(cfg.Interface, 1420)
	if err != nil {
		return res, fmt.Errorf("probe: create TUN %s: %w", cfg.Interface, err)
	}
	dev := device.NewDevice(td, conn.NewDefaultBind(), device.NewLogger(device.LogLevelSilent, ""))
	defer dev.Close()
	if err := dev.IpcSet("private_key=" + hex.EncodeToString(priv[:]) + "\n"); err != nil {
		return res, fmt.Errorf("probe: set key: %w", err)
	}
	link, err := netlink.LinkByName(cfg.Interface)
	if err == nil {
		err = netlink.LinkSetUp(link)
	}
	if err != nil {
		return res, fmt.Errorf("probe: bring %s up: %w", cfg.Interface, err)
	}
	if err := dev.Up(); err != nil {
		return res, fmt.Errorf("probe: device up: %w", err)
	}
	peerHex := hex.EncodeToString(peer[:])
	add := fmt.Sprintf("public_key=%s\nendpoint=%s\nallowed_ip=%s\npersistent_keepalive_interval=25\n",
		peerHex, cfg.Endpoint, cfg.AllowedIP)
	for i := range cfg.Rounds {
		if i > 0 {
			if err := dev.IpcSet("public_key=" + peerHex + "\nremove=true\n"); err != nil {
				return res, fmt.Errorf("probe: remove peer: %w", err)
			}
		}
		select {
		case <-time.After(cfg.Spacing):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		t0 := time.Now()
		// Turning persistent keepalive on sends a keepalive at once, and
		// with no session yet that starts the handshake.
		if err := dev.IpcSet(add); err != nil {
			return res, fmt.Errorf("probe: add peer: %w", err)
		}
		at, err := waitHandshake(ctx, dev, t0, cfg.Timeout)
		if err != nil {
			return res, fmt.Errorf("probe round %d: %w", i+1, err)
		}
		res.HandshakesMs = append(res.HandshakesMs, Ms(at.Sub(t0)))
	}
	return res, nil
}

func waitHandshake(ctx context.Context, dev *device.Device, t0 time.Time, timeout time.Duration) (time.Time, error) {
	for {
		s, err := dev.IpcGet()
		if err != nil {
			return time.Time{}, err
		}
		if at, ok := LastHandshake(s); ok {
			return at, nil
		}
		if time.Since(t0) > timeout {
			return time.Time{}, fmt.Errorf("no handshake within %s", timeout)
		}
		select {
		case <-time.After(100 * time.Microsecond):
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}
