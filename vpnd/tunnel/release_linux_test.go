package tunnel

import (
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
	"weak"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/internal/wgtest"
	"github.com/runos/vpn/vpnd/wgcfg"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// TestEngineReleasesRemovedPeers connects and disconnects a second cluster
// over and over (two stock servers in namespaces, a handshake each round)
// and checks that nothing keeps what a disconnect removed: every removed
// wireguard-go peer becomes garbage (a weak pointer to it goes nil after a
// GC, so neither the engine nor wireguard-go holds it), the engine tracks
// only the peers it has, and the live heap after a GC does not grow with
// the number of rounds (a peer with its queues is over 17 KiB, so keeping
// one per round would show many times over).
func TestEngineReleasesRemovedPeers(t *testing.T) {
	if wgtest.Inside() == "release" {
		insideRelease(t)
		return
	}
	netnstest.Require(t, "ip", "wireguard-go", "wg")
	laptop := netnstest.New(t, "lap")
	n1 := netnstest.New(t, "n1")
	n2 := netnstest.New(t, "n2")
	netnstest.Link(t, laptop, "eth1", "10.1.0.1/24", n1, "eth0", "10.1.0.2/24")
	netnstest.Link(t, laptop, "eth2", "10.2.0.1/24", n2, "eth0", "10.2.0.2/24")
	s1 := wgtest.StartServer(t, n1, serverAddr, 32768, devicePool)
	s2 := wgtest.StartServer(t, n2, netip.MustParsePrefix("100.100.2.1/24"), 32768, devicePool)
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*wgtest.Server{s1, s2} {
		if err := s.AddPeer(k.PublicKey().String(), deviceAddr); err != nil {
			t.Fatal(err)
		}
	}
	iface := wgtest.Name("wgt")
	t.Cleanup(func() { os.Remove("/var/run/wireguard/" + iface + ".sock") })
	wgtest.RunInside(t, laptop, "TestEngineReleasesRemovedPeers", "release", wgtest.Env(
		"T_KEY", k.String(), "T_IFACE", iface, "T_S1", s1.PublicKey(), "T_S2", s2.PublicKey())...)
}

func insideRelease(t *testing.T) {
	const (
		warm, rounds = 10, 50
		perRound     = 4 << 10 // live heap growth allowed per round, bytes
	)
	key, err := wgtypes.ParseKey(os.Getenv("T_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := wgtypes.ParseKey(os.Getenv("T_S1"))
	s2, _ := wgtypes.ParseKey(os.Getenv("T_S2"))
	e, err := New(os.Getenv("T_IFACE"), key, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	subnet2 := netip.MustParsePrefix("100.100.2.0/24")
	addrs := []netip.Prefix{netip.PrefixFrom(deviceAddr, 32)}
	ky3 := wgcfg.Peer{CID: "ky3", PublicKey: s1, Endpoint: netip.MustParseAddrPort("10.1.0.2:32768"), AllowedIPs: []netip.Prefix{subnet}}
	xym := wgcfg.Peer{CID: "xym", PublicKey: s2, Endpoint: netip.MustParseAddrPort("10.2.0.2:32768"), AllowedIPs: []netip.Prefix{subnet2}}
	one := wgcfg.Config{Addresses: addrs, Peers: []wgcfg.Peer{ky3}, Routes: []netip.Prefix{subnet}}
	both := wgcfg.Config{Addresses: addrs, Peers: []wgcfg.Peer{ky3, xym}, Routes: []netip.Prefix{subnet, subnet2}}
	if err := e.Apply(both); err != nil {
		t.Fatal(err)
	}
	waitHandshake(t, e, s1)
	waitHandshake(t, e, s2)

	var removed []weak.Pointer[device.Peer]
	var heapAtWarm uint64
	for i := 1; i <= rounds; i++ {
		// The peer as wireguard-go holds it now, nudges included.
		p := e.host.WireGuard().LookupPeer(device.NoisePublicKey(s2))
		if p == nil {
			t.Fatalf("round %d: xym's peer is not on the device", i)
		}
		removed = append(removed, weak.Make(p))
		p = nil
		if err := e.Apply(one); err != nil {
			t.Fatal(err)
		}
		if _, ok := e.Read().Peer(s2); ok {
			t.Fatalf("round %d: xym's peer is still on the device after the disconnect", i)
		}
		if err := e.Apply(both); err != nil {
			t.Fatal(err)
		}
		waitHandshake(t, e, s2)
		if i == warm {
			heapAtWarm = liveHeapAfterGC()
		}
	}
	heapAtEnd := liveHeapAfterGC()
	kept := 0
	for _, w := range removed {
		if w.Value() != nil {
			kept++
		}
	}
	if kept > 0 {
		t.Errorf("%d of %d removed wireguard-go peers are still reachable after a GC", kept, len(removed))
	}
	e.mu.Lock()
	tracked := len(e.peers)
	e.mu.Unlock()
	if tracked != 2 {
		t.Errorf("the engine tracks %d peers, want the 2 it has", tracked)
	}
	grew := int64(heapAtEnd) - int64(heapAtWarm)
	t.Logf("live heap after GC: %d bytes after %d rounds, %d after %d (%+d bytes a round)",
		heapAtWarm, warm, heapAtEnd, rounds, grew/(rounds-warm))
	if grew > perRound*(rounds-warm) {
		t.Errorf("the live heap grew %d bytes over rounds %d..%d (allowed %d a round): something keeps each disconnect's peer",
			grew, warm, rounds, perRound)
	}
}

// liveHeapAfterGC collects twice (the second pass also frees what only
// the first one's sync.Pool victims kept) and returns the live heap: the
// least of a few such readings 20 ms apart. What is in flight at one
// reading (a keepalive's or a handshake's message buffers, 64 KiB each,
// queued between wireguard-go's goroutines) would otherwise count as
// kept: on a loaded machine one reading swung by ~0.9 MB, more than 40
// kept peers, while what is truly kept is in every reading.
func liveHeapAfterGC() uint64 {
	least := ^uint64(0)
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	for i := range 5 {
		if i > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		runtime.GC()
		runtime.GC()
		metrics.Read(s)
		least = min(least, s[0].Value.Uint64())
	}
	return least
}
