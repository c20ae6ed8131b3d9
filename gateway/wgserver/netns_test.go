//go:build linux

package wgserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/testenv"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// The real server needs its own network namespace for the whole process
// (wireguard-go binds from its own goroutines, on any thread), so the test
// re-runs this test binary inside one: TestServerInNetns is the parent,
// TestServerReal the part that runs inside.
const envInNetns = "RUNOS_WGSERVER_IN_NETNS"

func TestServerInNetns(t *testing.T) {
	netnstest.Require(t, "ip", "wg")
	ns := netnstest.New(t, "wgs")
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	ifname := "rws" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := ns.Command(ctx, os.Args[0], "-test.run=^TestServerReal$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envInNetns+"="+ifname)
	out, err := cmd.CombinedOutput()
	t.Logf("inside %s:\n%s", ns.Name, out)
	if err != nil {
		t.Fatalf("the server test inside the namespace failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestServerReal") {
		t.Fatal("the inner test did not run")
	}
	if _, err := os.Stat("/var/run/wireguard/" + ifname + ".sock"); err == nil {
		t.Fatal("UAPI socket left behind")
	}
}

func TestServerReal(t *testing.T) {
	ifname := testenv.OnlyAsHelper(t, envInNetns, "a namespace made by TestServerInNetns")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	priv, _ := wgtypes.GeneratePrivateKey()
	s, err := Open(ifname, priv, log)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	k1, k2, k3 := key(t), key(t), key(t)
	spec := Spec{
		Port:       32768,
		Address:    netip.MustParsePrefix("100.100.1.1/24"),
		DevicePool: netip.MustParsePrefix("100.96.0.0/16"),
		Peers: []Peer{
			{DeviceID: "d1", PublicKey: k1, Address: netip.MustParseAddr("100.96.0.2")},
			{DeviceID: "d2", PublicKey: k2, Address: netip.MustParseAddr("100.96.0.3")},
		},
	}
	if err := s.Apply(spec); err != nil {
		t.Fatal(err)
	}
	st := mustState(t, s)
	if !st.Listening || st.ListenPort != 32768 || st.Index == 0 {
		t.Fatalf("after the first Apply: %+v", st)
	}
	index := st.Index
	// What the stock tools see.
	if pub := sh(t, "wg", "show", ifname, "public-key"); strings.TrimSpace(pub) != priv.PublicKey().String() {
		t.Fatalf("wg show public-key = %q", pub)
	}
	wantPeers(t, ifname, map[wgtypes.Key]string{k1: "100.96.0.2/32 fd52:4f53:5600::6460:2/128", k2: "100.96.0.3/32 fd52:4f53:5600::6460:3/128"})
	if a := sh(t, "ip", "-o", "addr", "show", "dev", ifname); !strings.Contains(a, "100.100.1.1/24") {
		t.Fatalf("address: %s", a)
	}
	if r := sh(t, "ip", "route", "show", "dev", ifname); !strings.Contains(r, "100.96.0.0/16") {
		t.Fatalf("routes: %s", r)
	}
	if l := sh(t, "ip", "-o", "link", "show", "dev", ifname); !strings.Contains(l, ",UP") {
		t.Fatalf("link not up: %s", l)
	}

	// ApplyPeers: the peers only. An address removed by hand stays
	// removed (the interface is not read or set again), and the next
	// Apply puts it back.
	sh(t, "ip", "addr", "del", "100.100.1.1/24", "dev", ifname)
	spec.Peers = append(spec.Peers, Peer{DeviceID: "d3", PublicKey: k3, Address: netip.MustParseAddr("100.96.0.4")})
	if err := s.ApplyPeers(spec); err != nil {
		t.Fatal(err)
	}
	wantPeers(t, ifname, map[wgtypes.Key]string{k1: "100.96.0.2/32 fd52:4f53:5600::6460:2/128", k2: "100.96.0.3/32 fd52:4f53:5600::6460:3/128",
		k3: "100.96.0.4/32 fd52:4f53:5600::6460:4/128"})
	if a := sh(t, "ip", "-o", "addr", "show", "dev", ifname); strings.Contains(a, "100.100.1.1/24") {
		t.Fatalf("ApplyPeers set the address again: %s", a)
	}
	if err := s.Apply(spec); err != nil {
		t.Fatal(err)
	}
	if a := sh(t, "ip", "-o", "addr", "show", "dev", ifname); !strings.Contains(a, "100.100.1.1/24") {
		t.Fatalf("Apply after ApplyPeers: address %s", a)
	}

	// Peer churn, a new port and a new address: all in place.
	spec.Peers = []Peer{
		{DeviceID: "d2", PublicKey: k2, Address: netip.MustParseAddr("100.96.0.7")},
		{DeviceID: "d3", PublicKey: k3, Address: netip.MustParseAddr("100.96.0.4")},
	}
	spec.Port = 32769
	spec.Address = netip.MustParsePrefix("100.100.2.1/24")
	spec.DevicePool = netip.MustParsePrefix("100.97.0.0/16")
	if err := s.Apply(spec); err != nil {
		t.Fatal(err)
	}
	st = mustState(t, s)
	if st.Index != index || !st.Listening || st.ListenPort != 32769 {
		t.Fatalf("after changes: %+v (index was %d)", st, index)
	}
	wantPeers(t, ifname, map[wgtypes.Key]string{k2: "100.96.0.7/32 fd52:4f53:5600::6460:7/128", k3: "100.96.0.4/32 fd52:4f53:5600::6460:4/128"})
	if a := sh(t, "ip", "-o", "addr", "show", "dev", ifname); strings.Contains(a, "100.100.1.1") || !strings.Contains(a, "100.100.2.1/24") {
		t.Fatalf("address after change: %s", a)
	}
	if r := sh(t, "ip", "route", "show", "dev", ifname); strings.Contains(r, "100.96.0.0/16") || !strings.Contains(r, "100.97.0.0/16") {
		t.Fatalf("routes after change: %s", r)
	}

	// A taken port is an error of Apply, and the state says not listening.
	taken, err := net.ListenUDP("udp", &net.UDPAddr{Port: 40000})
	if err != nil {
		t.Fatal(err)
	}
	spec.Port = 40000
	if err := s.Apply(spec); err == nil {
		t.Fatal("Apply with a taken port succeeded")
	} else if !strings.Contains(err.Error(), "UDP port 40000 is already in use") {
		t.Fatalf("taken port: unclear error %q", err)
	}
	if st := mustState(t, s); st.Listening {
		t.Fatalf("listening on a port another socket holds: %+v", st)
	}
	taken.Close()
	if err := s.Apply(spec); err != nil {
		t.Fatal(err)
	}
	if st := mustState(t, s); !st.Listening || st.ListenPort != 40000 || st.Index != index {
		t.Fatalf("after the port freed: %+v", st)
	}

	// Applying the same spec again changes nothing.
	if err := s.Apply(spec); err != nil {
		t.Fatal(err)
	}

	// Reach: a peer with no endpoint gets the one given and a handshake
	// initiation at once (a kept map's devices after a restart); a key
	// not on the server is skipped.
	dev, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ep := dev.LocalAddr().(*net.UDPAddr).AddrPort()
	if err := s.Reach(map[wgtypes.Key]netip.AddrPort{k2: ep, k1: ep}); err != nil {
		t.Fatal(err)
	}
	_ = dev.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	n, err := dev.Read(buf)
	if err != nil || n != 148 || buf[0] != 1 {
		t.Fatalf("no handshake initiation at the reached endpoint: %d bytes (type %d), %v", n, buf[0], err)
	}
	if got := mustState(t, s).Endpoints[k2]; got != ep {
		t.Fatalf("endpoint after Reach: %v, want %v", got, ep)
	}

	closed = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := net.InterfaceByName(ifname); err != nil {
			break
		}
		if i == 100 {
			t.Fatal("interface still there after Close")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r, _ := exec.Command("ip", "route", "show", "100.97.0.0/16").CombinedOutput(); strings.TrimSpace(string(r)) != "" {
		t.Fatalf("route left behind: %s", r)
	}
}

func mustState(t *testing.T, s *Server) State {
	t.Helper()
	st, err := s.State()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// wantPeers checks `wg show IF allowed-ips` from Debian's wireguard-tools.
func wantPeers(t *testing.T, ifname string, want map[wgtypes.Key]string) {
	t.Helper()
	out := sh(t, "wg", "show", ifname, "allowed-ips")
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			got[f[0]] = strings.Join(f[1:], " ")
		}
	}
	if len(got) != len(want) {
		t.Fatalf("wg show lists %d peers, want %d:\n%s", len(got), len(want), out)
	}
	for k, a := range want {
		if got[k.String()] != a {
			t.Fatalf("peer %s: allowed ips %q, want %q", k, got[k.String()], a)
		}
	}
}

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
