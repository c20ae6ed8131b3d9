package wghost

import (
	"log/slog"
	"os"
	"testing"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// BenchmarkDeviceRead: a read of a device with three peers in process (the
// host's, uapi.go) and through the UAPI socket with wgctrl (the host's
// until 2026-12-07): `go test ./wghost/ -run '^$' -bench BenchmarkDeviceRead`.
func BenchmarkDeviceRead(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("creates a TUN interface: needs root")
	}
	k, _ := wgtypes.GeneratePrivateKey()
	h, err := Open(Config{Name: "rwbench0", Key: k, Log: slog.New(slog.DiscardHandler), Bind: conn.NewDefaultBind()})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	var peers []wgtypes.PeerConfig
	for range 3 {
		pk, _ := wgtypes.GeneratePrivateKey()
		peers = append(peers, wgtypes.PeerConfig{PublicKey: pk.PublicKey()})
	}
	if err := h.Configure(wgtypes.Config{Peers: peers}); err != nil {
		b.Fatal(err)
	}
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.Device(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wgctrl", func(b *testing.B) {
		wc, err := wgctrl.New()
		if err != nil {
			b.Fatal(err)
		}
		defer wc.Close()
		for b.Loop() {
			if _, err := wc.Device(h.Name()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
