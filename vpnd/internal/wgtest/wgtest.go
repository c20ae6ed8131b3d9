//go:build linux

// Package wgtest gives the daemon's root tests a stock WireGuard server
// (Debian's wireguard-go driven by Debian's wg) in a network namespace, and
// a way to run part of a test inside another namespace by re-executing the
// test binary there with `ip netns exec`.
package wgtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Name returns an interface name unique to this run (wireguard-go's UAPI
// sockets in /var/run/wireguard are shared by every namespace and every
// engineer running tests at the same time).
func Name(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Server is a stock wireguard-go + wg peer standing in for a cluster's VPN
// server on a node.
type Server struct {
	NS      *netnstest.NS
	Iface   string
	Key     wgtypes.Key
	Port    int
	Address netip.Prefix // e.g. 100.100.1.1/24
	t       testing.TB
}

// PublicKey is the server's public key as control hands it out.
func (s *Server) PublicKey() string { return s.Key.PublicKey().String() }

// StartServer runs the stock userspace WireGuard in ns, listening on port,
// with addr on its interface and devicePool routed through it.
func StartServer(t testing.TB, ns *netnstest.NS, addr netip.Prefix, port int, devicePool netip.Prefix) *Server {
	t.Helper()
	netnstest.Require(t, "wireguard-go", "wg", "ip")
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{NS: ns, Iface: Name("wgs"), Key: k, Port: port, Address: addr, t: t}
	ns.Start([]string{"WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1", "LOG_LEVEL=error"}, "wireguard-go", "-f", s.Iface)
	sock := "/var/run/wireguard/" + s.Iface + ".sock"
	t.Cleanup(func() { os.Remove(sock) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stock wireguard-go did not create %s", sock)
		}
		time.Sleep(20 * time.Millisecond)
	}
	keyFile := filepath.Join(t.TempDir(), "server.key")
	if err := os.WriteFile(keyFile, []byte(k.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ns.MustExec("wg", "set", s.Iface, "private-key", keyFile, "listen-port", strconv.Itoa(port))
	ns.MustExec("ip", "addr", "add", addr.String(), "dev", s.Iface)
	ns.MustExec("ip", "link", "set", s.Iface, "up")
	ns.MustExec("ip", "route", "add", devicePool.String(), "dev", s.Iface)
	return s
}

// AddPeer lets a device in: its public key, allowed IP its tunnel address.
// It goes through the same UAPI socket `wg set` uses, from this process
// with wgctrl, so that it is as quick as a real gateway reacting to control
// (spawning wg takes milliseconds a gateway does not).
func (s *Server) AddPeer(pub string, addr netip.Addr) error {
	k, err := wgtypes.ParseKey(pub)
	if err != nil {
		return err
	}
	return s.configure(wgtypes.PeerConfig{PublicKey: k, ReplaceAllowedIPs: true,
		AllowedIPs: []net.IPNet{{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}}})
}

// RemovePeer drops a device.
func (s *Server) RemovePeer(pub string) error {
	k, err := wgtypes.ParseKey(pub)
	if err != nil {
		return err
	}
	return s.configure(wgtypes.PeerConfig{PublicKey: k, Remove: true})
}

func (s *Server) configure(pc wgtypes.PeerConfig) error {
	c, err := wgctrl.New()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.ConfigureDevice(s.Iface, wgtypes.Config{Peers: []wgtypes.PeerConfig{pc}})
}

// Peers lists the server's peers as the stock wg tool shows them.
func (s *Server) Peers() []string {
	out, err := s.NS.Exec("wg", "show", s.Iface, "peers")
	if err != nil {
		return nil
	}
	return strings.Fields(out)
}

// Handshake returns the last handshake the server saw from pub (zero: none).
func (s *Server) Handshake(pub string) time.Time {
	out, err := s.NS.Exec("wg", "show", s.Iface, "latest-handshakes")
	if err != nil {
		return time.Time{}
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == pub {
			if sec, _ := strconv.ParseInt(f[1], 10, 64); sec > 0 {
				return time.Unix(sec, 0)
			}
		}
	}
	return time.Time{}
}

// Exec runs argv inside ns through `ip netns exec` and returns its output
// (wrapping netnstest for callers that only have a name).
func Exec(ns *netnstest.NS, argv ...string) (string, error) {
	return ns.Exec(argv[0], argv[1:]...)
}

// InsideEnv is set in the environment of a test binary re-executed inside
// a namespace; its value says which part of the test to run.
const InsideEnv = "RUNOS_VPND_TEST_INSIDE"

// Inside returns the part a re-executed test binary was asked to run, or "".
func Inside() string { return os.Getenv(InsideEnv) }

// RunInside re-executes this test binary inside ns to run the test named
// test with part as its InsideEnv value and env added, and fails t (with
// the child's output) when the child fails.
func RunInside(t testing.TB, ns *netnstest.NS, test, part string, env ...string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns.Name, os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), InsideEnv+"="+part), env...)
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		t.Log("inside " + ns.Name + ": " + l)
	}
	if err != nil {
		t.Fatalf("%s inside %s: %v", part, ns.Name, err)
	}
	if !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s inside %s did not run the test (skipped or filtered?)", part, ns.Name)
	}
}

// Env formats KEY=value pairs for RunInside.
func Env(kv ...string) []string {
	var out []string
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, fmt.Sprintf("%s=%s", kv[i], kv[i+1]))
	}
	return out
}
