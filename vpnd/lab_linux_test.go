package vpnd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/internal/fakecontrol"
	"github.com/runos/vpn/vpnd/internal/wgtest"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/vishvananda/netns"
)

// lab is a laptop namespace running the real daemon (this test binary
// re-executed there), a fake control in its own namespace over HTTPS, and
// stock WireGuard servers (Debian's wireguard-go and wg) on nodes: ky3's n1
// and n2 (for moves) and xym's n1, each with a web page on :80 naming it.
type lab struct {
	t        testing.TB
	fc       *fakecontrol.Server
	apiURL   string
	caFile   string
	laptop   *netnstest.NS
	ctl      *netnstest.NS             // control's host (and the LAN resolver's, for DNS tests)
	env      []string                  // extra environment for the daemon
	bin      string                    // the real runos to run as the daemon ("": this test binary, or RUNOS_VPND_BIN)
	servers  map[string]*wgtest.Server // "ky3/n1", "ky3/n2", "xym/n1"
	mu       sync.Mutex
	active   map[string]string // cid → node whose server the gateway side serves
	stateDir string
	socket   string
	iface    string
	client   *localapi.Client
	d        *daemonProc
	// real runs bin (the real `runos vpnd`) even with env set; mountNS,
	// when set, is a persisted mount namespace the daemon runs in (with
	// nsenter) instead of `ip netns exec`'s.
	real    bool
	mountNS string
	// lastOutput is what the last daemon printed, kept once it exited.
	lastOutput string
}

var labDevicePool = netip.MustParsePrefix("100.96.0.0/16")

func newLab(t testing.TB) *lab {
	t.Helper()
	netnstest.Require(t, "ip", "wireguard-go", "wg", "curl", "ping")
	l := &lab{t: t, servers: map[string]*wgtest.Server{}, active: map[string]string{"ky3": "n1", "xym": "n1"}}
	l.laptop = netnstest.New(t, "lap") // with a resolv.conf of its own: the real daemon never writes the machine's
	ctl := netnstest.New(t, "ctl")
	l.ctl = ctl
	netnstest.Link(t, l.laptop, "eth0", "10.0.0.1/24", ctl, "eth0", "10.0.0.2/24")

	l.fc = fakecontrol.New()
	caFile, tlsCfg := fakecontrol.TLS(t, net.ParseIP("10.0.0.2"))
	l.caFile = caFile
	ts := httptest.NewUnstartedServer(l.fc)
	ts.Listener.Close()
	ts.Listener = listenIn(t, ctl, "10.0.0.2:443")
	ts.TLS = tlsCfg
	ts.StartTLS()
	t.Cleanup(func() { l.fc.Close(); ts.CloseClientConnections(); ts.Close() })
	l.apiURL = "https://10.0.0.2"

	for i, n := range []struct{ cid, nid, subnet string }{
		{"ky3", "n1", "100.100.1"}, {"ky3", "n2", "100.100.1"}, {"xym", "n1", "100.100.2"},
	} {
		ns := netnstest.New(t, n.cid+n.nid)
		lapIP := fmt.Sprintf("10.%d.0.1/24", i+1)
		nodeIP := fmt.Sprintf("10.%d.0.2", i+1)
		netnstest.Link(t, l.laptop, "eth"+strconv.Itoa(i+1), lapIP, ns, "eth0", nodeIP+"/24")
		s := wgtest.StartServer(t, ns, netip.MustParsePrefix(n.subnet+".1/24"), api.DefaultVPNPort, labDevicePool)
		l.servers[n.cid+"/"+n.nid] = s
		page := fmt.Sprintf("cluster=%s node=%s\n", n.cid, n.nid)
		web := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, page) })}
		go web.Serve(listenIn(t, ns, "0.0.0.0:80"))
		t.Cleanup(func() { web.Close() })
	}
	l.fc.AddCluster(api.Cluster{CID: "ky3", AID: "rjwrn", Name: "tc3-ky3", Domain: "ky3.rjwrn.example.com", UserVPN: api.UserVPNWireGuard},
		l.vpnConfig("ky3", "n1"))
	l.fc.AddCluster(api.Cluster{CID: "xym", AID: "rjwrn", Name: "tc2-xym", Domain: "xym.rjwrn.example.com", UserVPN: api.UserVPNWireGuard},
		l.vpnConfig("xym", "n1"))
	// The gateway's side of control, as the real one reacts to it.
	l.fc.OnJoin = func(cid string, dev api.Device) { l.gateway(cid, dev, true) }
	l.fc.OnLeave = func(cid string, dev api.Device) { l.gateway(cid, dev, false) }
	l.fc.OnSessionEnd = func(dev api.Device) {
		for _, s := range l.servers {
			_ = s.RemovePeer(dev.PublicKey)
		}
	}

	dir := t.TempDir()
	l.stateDir = filepath.Join(dir, "state")
	l.socket = filepath.Join(dir, "vpnd.sock")
	l.iface = wgtest.Name("wgt")
	t.Cleanup(func() { os.Remove("/var/run/wireguard/" + l.iface + ".sock") })
	l.client = localapi.NewClient(l.socket)
	return l
}

func (l *lab) vpnConfig(cid, nid string) api.VPNConfig {
	s := l.servers[cid+"/"+nid]
	i := map[string]int{"ky3/n1": 1, "ky3/n2": 2, "xym/n1": 3}[cid+"/"+nid]
	return api.VPNConfig{ServiceID: "svc-" + cid, NodeID: nid, PublicKey: s.PublicKey(),
		Endpoint: fmt.Sprintf("10.%d.0.2:%d", i, api.DefaultVPNPort), Subnet: s.Address.Masked().String(),
		Address: s.Address.Addr().String(), DNS: s.Address.Addr().String(), Domains: []string{cid + ".rjwrn.example.com"}, Ready: true}
}

// gateway adds or removes a device on the cluster's active server.
func (l *lab) gateway(cid string, dev api.Device, add bool) {
	l.mu.Lock()
	s := l.servers[cid+"/"+l.active[cid]]
	l.mu.Unlock()
	var err error
	if add {
		err = s.AddPeer(dev.PublicKey, netip.MustParseAddr(dev.Address))
	} else {
		err = s.RemovePeer(dev.PublicKey)
	}
	if err != nil {
		l.t.Errorf("gateway %s: %v", cid, err)
	}
}

// move switches cid's VPN server to node nid the way control does: the
// target serves every joined device first, then every device is told.
func (l *lab) move(cid, nid string) {
	l.t.Helper()
	l.prepareMove(cid, nid)
	l.pushMove(cid, nid)
}

// prepareMove has the target serve every joined device (the standby step).
func (l *lab) prepareMove(cid, nid string) {
	l.t.Helper()
	for _, dev := range l.fc.Devices() {
		if strings.Contains(strings.Join(l.fc.Joined(dev.ID), ","), cid) {
			if err := l.servers[cid+"/"+nid].AddPeer(dev.PublicKey, netip.MustParseAddr(dev.Address)); err != nil {
				l.t.Fatal(err)
			}
		}
	}
}

// pushMove tells every device (the switch step).
func (l *lab) pushMove(cid, nid string) {
	l.mu.Lock()
	l.active[cid] = nid
	l.mu.Unlock()
	l.fc.SetVPN(cid, l.vpnConfig(cid, nid))
}

// listenIn opens a listener inside ns: a socket stays in the namespace it
// was made in, so this process can serve it from any thread afterwards.
func listenIn(t testing.TB, ns *netnstest.NS, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	inNS(t, ns, func() (err error) { ln, err = net.Listen("tcp", addr); return err })
	t.Cleanup(func() { ln.Close() })
	return ln
}

// listenPacketIn is listenIn for UDP.
func listenPacketIn(t testing.TB, ns *netnstest.NS, addr string) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	inNS(t, ns, func() (err error) { pc, err = net.ListenPacket("udp", addr); return err })
	t.Cleanup(func() { pc.Close() })
	return pc
}

// inNS runs f on an OS thread switched into ns.
func inNS(t testing.TB, ns *netnstest.NS, f func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked when the switch back fails: the thread then dies with this goroutine
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.GetFromName(ns.Name)
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		ferr := f()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	if err := <-errc; err != nil {
		t.Fatalf("in %s: %v", ns.Name, err)
	}
}

// daemonProc is the daemon running in the laptop namespace.
type daemonProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  *strings.Builder
	mu   *sync.Mutex
}

// start runs the daemon in the laptop namespace and waits for its socket.
func (l *lab) start() {
	l.t.Helper()
	argv := []string{os.Args[0], "-test.run=^TestDaemonReal$", "-test.v", "-test.count=1"}
	bin := l.bin
	if bin == "" {
		bin = os.Getenv("RUNOS_VPND_BIN")
	}
	if bin != "" && (len(l.env) == 0 || l.real) {
		// The real `runos vpnd` command instead of this test binary (for
		// memory: the test binary carries the test code, and the race
		// detector when built with -race).
		argv = []string{bin, "vpnd", "--state-dir", l.stateDir, "--socket", l.socket, "--ca-file", l.caFile, "--interface", l.iface}
	}
	full := l.inLaptop(argv...)
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env = append(os.Environ(), wgtest.InsideEnv+"=daemon", "T_STATE="+l.stateDir, "T_SOCKET="+l.socket,
		"T_CA="+l.caFile, "T_IFACE="+l.iface)
	cmd.Env = append(cmd.Env, l.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &daemonProc{cmd: cmd, done: make(chan struct{}), out: &strings.Builder{}, mu: &sync.Mutex{}}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			l.t.Log("vpnd: " + sc.Text())
		}
	}()
	go func() { _ = cmd.Wait(); pw.Close(); close(p.done) }()
	l.d = p
	l.t.Cleanup(func() { l.stop() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := l.client.Status(context.Background()); err == nil {
			return
		}
		select {
		case <-p.done:
			l.t.Fatal("the daemon exited at start")
		default:
		}
		if time.Now().After(deadline) {
			l.t.Fatal("the daemon's socket never answered")
		}
	}
}

// inLaptop is the command line that runs argv in the laptop's network
// namespace (and in mountNS, when set).
func (l *lab) inLaptop(argv ...string) []string {
	if l.mountNS != "" {
		return append([]string{"nsenter", "--mount=" + l.mountNS, "--net=/run/netns/" + l.laptop.Name, "--"}, argv...)
	}
	return append([]string{"ip", "netns", "exec", l.laptop.Name}, argv...)
}

// stop sends SIGTERM and waits for a clean exit.
func (l *lab) stop() {
	p := l.d
	if p == nil {
		return
	}
	l.d = nil
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		l.t.Error("the daemon did not stop on SIGTERM")
	}
	if p.cmd.ProcessState != nil && !p.cmd.ProcessState.Success() {
		l.t.Errorf("the daemon exited with %v", p.cmd.ProcessState)
	}
}

// kill9 kills the daemon as a crash would.
func (l *lab) kill9() {
	p := l.d
	l.d = nil
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func (l *lab) output() string {
	if l.d == nil {
		return ""
	}
	l.d.mu.Lock()
	defer l.d.mu.Unlock()
	return l.d.out.String()
}

// rssKB reads the daemon's resident memory.
func (l *lab) rssKB() int { return l.memKB("VmRSS") }

// memKB reads one of the daemon's memory lines of /proc/PID/status (VmRSS,
// RssAnon…) in KiB; -1 if it cannot.
func (l *lab) memKB(field string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", l.d.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// waitStatus follows the watch stream until cond holds.
func (l *lab) waitStatus(what string, cond func(*localapi.Status) bool) *localapi.Status {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got *localapi.Status
	err := l.client.Watch(ctx, func(st *localapi.Status) bool {
		got = st
		return !cond(st)
	})
	if err != nil || got == nil || !cond(got) {
		l.t.Fatalf("waiting for %s: %v (last status %+v)", what, err, got)
	}
	return got
}

func (l *lab) curl(url string) (string, error) {
	return l.laptop.Exec("curl", "-s", "--max-time", "5", url)
}

// insideDaemon is the daemon's process: Run until SIGTERM.
func insideDaemon(t *testing.T, part string) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg := Config{StateDir: os.Getenv("T_STATE"), Socket: os.Getenv("T_SOCKET"), CAFile: os.Getenv("T_CA"),
		Interface: os.Getenv("T_IFACE"), Logger: log,
		// A stand-in for dnsplit's clean-up that leaves a trace of each run.
		Cleanup: func(stateDir string, _ *slog.Logger) error {
			f, err := os.OpenFile(filepath.Join(stateDir, "cleanup.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString(part + "\n")
			return err
		}}
	if v := os.Getenv("T_DNS"); v != "" {
		// T_DNS=auto: dnsplit chooses the mode, as `runos vpnd` has it do;
		// any other value forces resolv.conf mode.
		mode := dnsplit.ModeResolvConf
		if v == "auto" {
			mode = ""
		}
		cfg.DNS = func(iface string, log *slog.Logger) (dnsplit.Configurator, error) {
			return dnsplit.New(dnsplit.Options{Interface: iface, StateDir: cfg.StateDir, Logger: log, Mode: mode})
		}
		cfg.Cleanup = dnsplit.Cleanup
	}
	var err error
	if part == "cleanup" {
		err = Cleanup(ctx, cfg)
	} else {
		err = Run(ctx, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
}
