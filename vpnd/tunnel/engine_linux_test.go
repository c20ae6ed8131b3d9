package tunnel

import (
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/internal/wgtest"
	"github.com/runos/vpn/vpnd/wgcfg"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

var (
	devicePool = netip.MustParsePrefix("100.96.0.0/16")
	deviceAddr = netip.MustParseAddr("100.96.0.2")
	subnet     = netip.MustParsePrefix("100.100.1.0/24")
	serverAddr = netip.MustParsePrefix("100.100.1.1/24")
)

// TestEngineReal runs the engine in a laptop namespace against two stock
// WireGuard servers (Debian's wireguard-go and wg) on two nodes: handshake,
// the stock wg reading the interface, a ping through the tunnel, a move to
// the second server whose peer is added late, and a clean close.
func TestEngineReal(t *testing.T) {
	if wgtest.Inside() == "engine" {
		insideEngine(t)
		return
	}
	netnstest.Require(t, "ip", "wireguard-go", "wg", "ping")
	laptop := netnstest.New(t, "lap")
	n1 := netnstest.New(t, "n1")
	n2 := netnstest.New(t, "n2")
	netnstest.Link(t, laptop, "eth1", "10.1.0.1/24", n1, "eth0", "10.1.0.2/24")
	netnstest.Link(t, laptop, "eth2", "10.2.0.1/24", n2, "eth0", "10.2.0.2/24")
	s1 := wgtest.StartServer(t, n1, serverAddr, 32768, devicePool)
	s2 := wgtest.StartServer(t, n2, serverAddr, 32768, devicePool)
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.AddPeer(k.PublicKey().String(), deviceAddr); err != nil {
		t.Fatal(err)
	}
	iface := wgtest.Name("wgt")
	t.Cleanup(func() { os.Remove("/var/run/wireguard/" + iface + ".sock") })
	wgtest.RunInside(t, laptop, "TestEngineReal", "engine", wgtest.Env(
		"T_KEY", k.String(), "T_IFACE", iface,
		"T_S1", s1.PublicKey(), "T_S2", s2.PublicKey(), "T_S2IF", s2.Iface)...)
	if s1.Handshake(k.PublicKey().String()).IsZero() || s2.Handshake(k.PublicKey().String()).IsZero() {
		t.Error("a stock server saw no handshake from the engine")
	}
	if _, err := laptop.Exec("ip", "link", "show", iface); err == nil {
		t.Errorf("%s still exists after Close", iface)
	}
}

func insideEngine(t *testing.T) {
	key, err := wgtypes.ParseKey(os.Getenv("T_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	iface := os.Getenv("T_IFACE")
	s1, _ := wgtypes.ParseKey(os.Getenv("T_S1"))
	s2, _ := wgtypes.ParseKey(os.Getenv("T_S2"))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e, err := New(iface, key, log)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cfg := func(k wgtypes.Key, ep string) wgcfg.Config {
		return wgcfg.Config{
			Addresses: []netip.Prefix{netip.PrefixFrom(deviceAddr, 32)},
			Peers:     []wgcfg.Peer{{CID: "ky3", PublicKey: k, Endpoint: netip.MustParseAddrPort(ep), AllowedIPs: []netip.Prefix{subnet}}},
			Routes:    []netip.Prefix{subnet},
		}
	}
	start := time.Now()
	if err := e.Apply(cfg(s1, "10.1.0.2:32768")); err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(cfg(s1, "10.1.0.2:32768")); err != nil { // again: nothing to do
		t.Fatal(err)
	}
	waitHandshake(t, e, s1)
	t.Logf("first handshake %v after Apply", time.Since(start))

	out, err := exec.Command("wg", "show", iface).CombinedOutput()
	if err != nil {
		t.Fatalf("stock wg show %s: %v: %s", iface, err, out)
	}
	for _, want := range []string{"interface: " + iface, "peer: " + s1.String(), "latest handshake", "allowed ips: 100.100.1.0/24", "persistent keepalive: every 25 seconds"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("wg show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), key.String()) {
		t.Error("wg show printed the private key") // wg show never should; a guard against us leaking it elsewhere
	}
	ping(t)
	r := e.Read()
	if !r.Up || r.PublicKey != key.PublicKey() || len(r.Peers) != 1 || r.Peers[0].AddedAt.IsZero() {
		t.Errorf("report %+v", r)
	}

	// A move: the second server does not know the device yet when the
	// engine switches, as when the gateway adds the peer a moment late.
	start = time.Now()
	if err := e.Apply(cfg(s2, "10.2.0.2:32768")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if out, err := exec.Command("wg", "set", os.Getenv("T_S2IF"), "peer", key.PublicKey().String(),
		"allowed-ips", "100.96.0.2/32").CombinedOutput(); err != nil {
		t.Fatalf("add the device on the second server: %v: %s", err, out)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		e.Nudge()
		if p, ok := e.Read().Peer(s2); ok && !p.LastHandshake.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no handshake with the second server")
		}
	}
	t.Logf("handshake with the late second server %v after the switch", time.Since(start))
	r = e.Read()
	if p, _ := r.Peer(s2); p.HandshakeRetries == 0 {
		t.Error("the handshake with the late server needed a nudge, but the report counts no retry")
	}
	if len(r.Peers) != 1 || r.Peers[0].PublicKey != s2 {
		t.Errorf("after the move the device has %+v", r.Peers)
	}
	out, _ = exec.Command("wg", "show", iface, "peers").CombinedOutput()
	if strings.TrimSpace(string(out)) != s2.String() {
		t.Errorf("stock wg lists peers %q, want only %s", out, s2)
	}
	ping(t)

	if err := e.Apply(wgcfg.Config{}); err != nil {
		t.Fatal(err)
	}
	if r := e.Read(); len(r.Peers) != 0 || len(r.Addresses) != 0 {
		t.Errorf("empty config left %+v", r)
	}
	if out, _ := exec.Command("ip", "route", "show", "dev", iface).CombinedOutput(); strings.Contains(string(out), "100.100.1.0") {
		t.Errorf("route left: %s", out)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(cfg(s1, "10.1.0.2:32768")); err == nil {
		t.Error("Apply after Close succeeded")
	}
}

func waitHandshake(t *testing.T, e *Engine, k wgtypes.Key) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		e.Nudge()
		if p, ok := e.Read().Peer(k); ok && !p.LastHandshake.IsZero() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no handshake with %s", k)
		}
	}
}

func ping(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("ping", "-c", "1", "-W", "5", "100.100.1.1").CombinedOutput(); err != nil {
		t.Fatalf("ping through the tunnel: %v: %s", err, out)
	}
}
