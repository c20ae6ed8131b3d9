//go:build linux

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/vishvananda/netns"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func uniq(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// inNS runs f on an OS thread switched into ns; sockets f creates stay in
// ns. The thread is switched back before it is released: a locked
// goroutine that ends on the main thread parks that thread instead of
// ending it, and a main thread left in ns would make the test process one
// of ns's processes (netnstest's cleanup kills those).
func inNS(ns *netnstest.NS, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.GetFromName(ns.Name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = f()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread() // else the thread stays locked and ends with us
		}
		errc <- err
	}()
	return <-errc
}

func listenIn(t *testing.T, ns *netnstest.NS, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := inNS(ns, func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns.Name, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// serveWebApp stands in for Traefik on the node: any address, port 8080.
func serveWebApp(t *testing.T, ns *netnstest.NS, cid, nid string) {
	ln := listenIn(t, ns, "0.0.0.0:8080")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "cluster=%s node=%s\n", cid, nid)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
}

// dnsQuery asks server (ip:53) from inside ns.
func dnsQuery(t *testing.T, ns *netnstest.NS, network, server, name string, qtype uint16) *dns.Msg {
	t.Helper()
	var c net.Conn
	if err := inNS(ns, func() (err error) { c, err = net.DialTimeout(network, server, 5*time.Second); return err }); err != nil {
		t.Fatalf("dial %s %s from %s: %v", network, server, ns.Name, err)
	}
	defer c.Close()
	co := &dns.Conn{Conn: c}
	_ = co.SetDeadline(time.Now().Add(10 * time.Second))
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	if err := co.WriteMsg(q); err != nil {
		t.Fatalf("dns %s %s: %v", network, name, err)
	}
	r, err := co.ReadMsg()
	if err != nil {
		t.Fatalf("dns %s %s: %v", network, name, err)
	}
	return r
}

// gatewayProc is a runos-gateway process inside a node namespace.
type gatewayProc struct {
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // Wait's result, once done is closed
	logs     *lockedBuffer
	stateDir string
	iface    string
	ns       *netnstest.NS
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	t  *testing.T
	p  string
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.t.Log(l.p + line)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startGateway runs the binary built by TestMain in ns. extra flags are
// appended (later ones win).
func startGateway(t *testing.T, ns *netnstest.NS, nid, controlURL, caFile, token string, extra ...string) *gatewayProc {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &gatewayProc{
		done:     make(chan struct{}),
		logs:     &lockedBuffer{t: t, p: ns.Name + " runos-gateway: "},
		stateDir: filepath.Join(dir, "state"),
		iface:    uniq("rgw"),
		ns:       ns,
	}
	args := []string{"netns", "exec", ns.Name, gatewayBin,
		"--control", controlURL, "--node-id", nid, "--token-file", tokenFile, "--state-dir", g.stateDir,
		"--interface", g.iface, "--log-level", "debug"}
	if caFile != "" {
		args = append(args, "--ca-file", caFile)
	}
	g.cmd = exec.Command("ip", append(args, extra...)...)
	g.cmd.Env = append(os.Environ(), "RUNOS_CA_FILE=")
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.err = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		g.stop(t)
		if _, err := os.Stat("/var/run/wireguard/" + g.iface + ".sock"); err == nil {
			t.Errorf("UAPI socket of %s left behind", g.iface)
			_ = os.Remove("/var/run/wireguard/" + g.iface + ".sock")
		}
	})
	return g
}

// stop sends SIGTERM and waits (SIGKILL after 15 s); it returns Wait's error.
func (g *gatewayProc) stop(t *testing.T) error {
	select {
	case <-g.done:
		return g.err
	default:
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(15 * time.Second):
		t.Errorf("runos-gateway did not stop within 15 s of SIGTERM; killing it")
		_ = syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL)
		<-g.done
	}
	return g.err
}

// ifindex returns the interface's index in the gateway's namespace (0: none).
func (g *gatewayProc) ifindex(t *testing.T) int {
	t.Helper()
	out, err := g.ns.Exec("ip", "-o", "link", "show", "dev", g.iface)
	if err != nil {
		return 0
	}
	i, _ := strconv.Atoi(strings.TrimSuffix(strings.Fields(out)[0], ":"))
	return i
}

func (g *gatewayProc) privateKey(t *testing.T) wgtypes.Key {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(g.stateDir, "gateway.key"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := wgtypes.ParseKey(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// stockPeer is Debian's wireguard-go configured with `wg set`: the
// device side of the interop tests.
type stockPeer struct {
	ns    *netnstest.NS
	iface string
	key   wgtypes.Key
}

func startStockPeer(t *testing.T, ns *netnstest.NS, addr string) *stockPeer {
	t.Helper()
	p := &stockPeer{ns: ns, iface: uniq("rdv")}
	p.key, _ = wgtypes.GeneratePrivateKey()
	sock := "/var/run/wireguard/" + p.iface + ".sock"
	t.Cleanup(func() { _ = os.Remove(sock) })
	ns.Start([]string{"WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1", "LOG_LEVEL=error"}, "wireguard-go", "-f", p.iface)
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 500 {
			t.Fatal("stock wireguard-go did not create its UAPI socket")
		}
		time.Sleep(20 * time.Millisecond)
	}
	keyFile := filepath.Join(t.TempDir(), "device.key")
	if err := os.WriteFile(keyFile, []byte(p.key.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ns.MustExec("wg", "set", p.iface, "private-key", keyFile)
	ns.MustExec("ip", "addr", "add", addr+"/32", "dev", p.iface)
	ns.MustExec("ip", "link", "set", p.iface, "up")
	return p
}

// setServer makes the device's one server peer server at endpoint, routing
// subnet through it (removing old first, as the daemon swaps on a move).
func (p *stockPeer) setServer(t *testing.T, old *wgtypes.Key, server wgtypes.Key, endpoint, subnet string) {
	t.Helper()
	args := []string{"set", p.iface}
	if old != nil {
		args = append(args, "peer", old.String(), "remove")
	}
	args = append(args, "peer", server.String(), "endpoint", endpoint, "allowed-ips", subnet)
	p.ns.MustExec("wg", args...)
	if out, _ := p.ns.Exec("ip", "route", "show", subnet); !strings.Contains(out, p.iface) {
		p.ns.MustExec("ip", "route", "add", subnet, "dev", p.iface)
	}
}
