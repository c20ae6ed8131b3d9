//go:build linux

package wghost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/testenv"
)

// Two hosts need a network namespace for the whole process (wireguard-go
// binds from its own goroutines, on any thread): TestHostsInNetns re-runs
// this binary inside one, where TestHostsReal does the work.
const envHostsInNetns = "RUNOS_WGHOST_IN_NETNS"

func TestHostsInNetns(t *testing.T) {
	netnstest.Require(t, "ip", "wg")
	ns := netnstest.New(t, "wgh")
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	prefix := "rwh" + hex.EncodeToString(suffix)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := ns.Command(ctx, os.Args[0], "-test.run=^TestHostsReal$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envHostsInNetns+"="+prefix)
	out, err := cmd.CombinedOutput()
	t.Logf("inside %s:\n%s", ns.Name, out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestHostsReal") {
		t.Fatalf("the hosts inside the namespace failed: %v", err)
	}
	for _, n := range []string{prefix + "a", prefix + "b"} {
		if _, err := os.Stat("/var/run/wireguard/" + n + ".sock"); err == nil {
			t.Errorf("UAPI socket of %s left behind", n)
		}
	}
}

// TestHostsReal: two hosts on one Bind type (UDP only), their peers set by
// Diff, handshake over loopback; the stock wg reads them; the device's
// own peers then differ from the wanted ones in nothing; Close removes
// the interfaces.
func TestHostsReal(t *testing.T) {
	prefix := testenv.OnlyAsHelper(t, envHostsInNetns, "TestHostsInNetns")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	open := func(name string, port int) (*Host, wgtypes.Key) {
		k, _ := wgtypes.GeneratePrivateKey()
		h, err := Open(Config{Name: name, Key: k, Log: log, Bind: NewBind(conn.NewDefaultBind(), &perPeer{})})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Configure(wgtypes.Config{ListenPort: &port}); err != nil {
			t.Fatal(err)
		}
		if err := h.Up(); err != nil {
			t.Fatal(err)
		}
		return h, k.PublicKey()
	}
	a, apub := open(prefix+"a", 41001)
	b, bpub := open(prefix+"b", 41002)
	wantA := []Peer{{PublicKey: bpub, Endpoint: netip.MustParseAddrPort("127.0.0.1:41002"),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.99.0.2/32")}, Keepalive: 25 * time.Second}}
	wantB := []Peer{{PublicKey: apub, AllowedIPs: []netip.Prefix{HostPrefix(netip.MustParseAddr("10.99.0.1"))}}}
	sync := func(h *Host, want []Peer) int {
		d, err := h.Device()
		if err != nil {
			t.Fatal(err)
		}
		pcs := Diff(PeersOf(d), want)
		if err := h.Configure(wgtypes.Config{Peers: pcs}); err != nil {
			t.Fatal(err)
		}
		return len(pcs)
	}
	sync(b, wantB) // first: a's keepalive sends an initiation at once
	sync(a, wantA)
	if err := a.Handshake(bpub); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		d, err := a.Device()
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Peers) == 1 && !d.Peers[0].LastHandshakeTime.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no handshake between the hosts: %+v", d.Peers)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := exec.Command("wg", "show", b.Name(), "endpoints").CombinedOutput(); err != nil || !strings.Contains(string(out), apub.String()+"\t127.0.0.1:41001") {
		t.Errorf("wg show %s endpoints: %s %v", b.Name(), out, err)
	}
	if n := sync(a, wantA) + sync(b, wantB); n != 0 {
		t.Errorf("the hosts' own peers differ from the wanted ones in %d changes", n)
	}
	// The in-process reading (uapi.go) says what wgctrl says through the
	// socket: read ours first, so counters can only have grown since.
	wc, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	for _, h := range []*Host{a, b} {
		ours, err := h.Device()
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := wc.Device(h.Name())
		if err != nil {
			t.Fatal(err)
		}
		if msg := sameDevice(ours, theirs); msg != "" {
			t.Errorf("%s: read in process and by wgctrl differ: %s", h.Name(), msg)
		}
	}
	for _, h := range []*Host{a, b} {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
		if _, err := net.InterfaceByName(h.Name()); err == nil {
			t.Errorf("%s still there after Close", h.Name())
		}
	}
}

// sameDevice says how a (read first) differs from b beyond counters that
// grew in between; "" when it does not.
func sameDevice(a, b *wgtypes.Device) string {
	if a.Name != b.Name || a.Type != b.Type || a.PrivateKey != b.PrivateKey || a.PublicKey != b.PublicKey ||
		a.ListenPort != b.ListenPort || a.FirewallMark != b.FirewallMark || len(a.Peers) != len(b.Peers) {
		return fmt.Sprintf("device %+v vs %+v", *a, *b)
	}
	for i, p := range a.Peers {
		q := b.Peers[i]
		if p.ReceiveBytes > q.ReceiveBytes || p.TransmitBytes > q.TransmitBytes {
			return fmt.Sprintf("peer %s: counters %d/%d after %d/%d", p.PublicKey, q.ReceiveBytes, q.TransmitBytes, p.ReceiveBytes, p.TransmitBytes)
		}
		p.ReceiveBytes, p.TransmitBytes = q.ReceiveBytes, q.TransmitBytes
		if p.LastHandshakeTime.After(q.LastHandshakeTime) {
			return fmt.Sprintf("peer %s: handshake %s after %s", p.PublicKey, q.LastHandshakeTime, p.LastHandshakeTime)
		}
		p.LastHandshakeTime = q.LastHandshakeTime
		if p.Endpoint.String() != q.Endpoint.String() {
			return fmt.Sprintf("peer %s: endpoint %v vs %v", p.PublicKey, p.Endpoint, q.Endpoint)
		}
		p.Endpoint = q.Endpoint
		if fmt.Sprint(p) != fmt.Sprint(q) {
			return fmt.Sprintf("peer %+v vs %+v", p, q)
		}
	}
	return ""
}
