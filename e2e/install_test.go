//go:build !windows

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// installWorld is a lab whose laptop has no daemon of its own: the test
// installs one as a real System V service with `runos vpn install`, run
// inside the laptop so that the service's processes live in its network
// and mount namespaces (its wg1, its /run/runos, its resolv.conf). The
// service's name, binary and state directory are the test's own, and the
// laptop's /etc is an overlay of the machine's (lab/mountns.go), so the
// init script and runlevel links land in the laptop's /etc alone: the test
// looks for them there (clientFiles), and the machine's /etc/init.d and
// /usr/local/bin are not disturbed.
type installWorld struct {
	*world
	base            string // 0755: the users reach the binary, the CA and their homes
	svc             string
	binary          string // the installed runos
	stateDir        string
	logFile         string
	pidFile         string
	operator, plain testUser
}

type testUser struct {
	name     string
	uid, gid int
	home     string
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newInstallWorld(t testing.TB) *installWorld {
	t.Helper()
	netnstest.Require(t, "ip", "unshare", "nsenter", "findmnt", "dnsmasq", "wg", "curl",
		"useradd", "userdel", "setpriv", "service", "setsid")
	if tt, ok := t.(*testing.T); ok {
		tt.Parallel()
	}
	base, err := os.MkdirTemp("", "runos-install-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	t.Cleanup(func() { os.RemoveAll(base) })
	// The programs where every user may run them (binDir is 0700).
	bin := filepath.Join(base, "bin")
	os.MkdirAll(bin, 0o755)
	for _, p := range []string{"runos", "runos-control", "runos-gateway", "runos-lab"} {
		b, err := os.ReadFile(filepath.Join(binDir, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, p), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(base, "lab")
	l, err := lab.Up(ctx, lab.Options{Dir: dir, BinDir: bin, Progress: &progress, Skip: []string{"vpnd"}})
	if err != nil {
		t.Fatalf("lab up: %v\n%s", err, progress.String())
	}
	id := randHex(3)
	w := &installWorld{
		world:    &world{t: t, lab: l, env: l.Env()},
		base:     base,
		svc:      "runos-vpnd-e2e-" + id,
		binary:   filepath.Join(base, "installed", "runos"),
		stateDir: filepath.Join(base, "state"),
	}
	w.logFile = "/var/log/" + w.svc + ".log"
	w.pidFile = "/var/run/" + w.svc + ".pid"
	t.Cleanup(func() {
		if t.Failed() {
			w.dumpLogs()
			b, _ := os.ReadFile(w.logFile)
			t.Logf("--- %s:\n%s", w.logFile, b)
		}
		w.forceRemove()
		if err := lab.Down(context.Background(), dir, lab.DownOptions{}); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	w.operator = w.addUser("rtop" + id)
	w.plain = w.addUser("rtus" + id)
	return w
}

// addUser creates a real user (removed when the test ends) with a home of
// its own for the runos config.
func (w *installWorld) addUser(name string) testUser {
	t := w.t
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	out, err := exec.Command("id", "-u", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	out, _ = exec.Command("id", "-g", name).Output()
	gid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	u := testUser{name: name, uid: uid, gid: gid, home: filepath.Join(w.base, "home-"+name)}
	os.MkdirAll(u.home, 0o700)
	os.Chown(u.home, uid, gid)
	return u
}

// forceRemove takes away whatever a failed test left of the service: the
// processes by the pids in its pid files, the script and its links, the
// pid files and the log.
func (w *installWorld) forceRemove() {
	w.uninstall(nil, "--purge") // the normal way first
	for _, f := range []string{w.pidFile, w.pidFile + ".daemon"} {
		if b, err := os.ReadFile(f); err == nil {
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		os.Remove(f)
	}
	_, _ = w.run("client", nil, "sh", "-c", `rm -f /etc/init.d/"$1" /etc/rc[0-6].d/[SK][0-9][0-9]"$1"`, "sh", w.svc)
	os.Remove(w.logFile)
}

// clientFiles lists the files matching a shell pattern in the laptop's
// view of the filesystem, each with its permission bits in octal.
func (w *installWorld) clientFiles(pattern string) map[string]string {
	out, _ := w.run("client", nil, "sh", "-c", `for f in `+pattern+`; do [ -e "$f" ] && stat -c '%n %a' "$f"; done; true`)
	files := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, perm, ok := strings.Cut(line, " "); ok {
			files[name] = perm
		}
	}
	return files
}

func (w *installWorld) installArgs() []string {
	return []string{"--service-name", w.svc, "--binary", w.binary, "--state-dir", w.stateDir}
}

// install runs `runos vpn install` as root inside the laptop.
func (w *installWorld) install(env []string, args ...string) (string, error) {
	argv := append([]string{filepath.Join(w.base, "bin", "runos"), "vpn", "install"}, w.installArgs()...)
	return w.run("client", env, append(argv, args...)...)
}

func (w *installWorld) uninstall(env []string, args ...string) (string, error) {
	argv := append([]string{w.binary, "vpn", "uninstall"}, w.installArgs()...)
	if _, err := os.Stat(w.binary); err != nil {
		argv[0] = filepath.Join(w.base, "bin", "runos")
	}
	return w.run("client", env, append(argv, args...)...)
}

// as runs the installed runos on the laptop as user u, with the user's
// own home and config, and the operator's scripted browser.
func (w *installWorld) as(u testUser, args ...string) (string, error) {
	env := []string{"HOME=" + u.home, "XDG_CONFIG_HOME=" + filepath.Join(u.home, ".config"),
		"RUNOS_CONFIG=" + filepath.Join(u.home, "config.json"), "RUNOS_LAB_HOST=", "BROWSER=" + filepath.Join(u.home, "browser")}
	argv := append([]string{"setpriv", "--reuid", strconv.Itoa(u.uid), "--regid", strconv.Itoa(u.gid), "--init-groups", "--", w.binary}, args...)
	return w.run("client", env, argv...)
}

// giveBrowser lets u sign in as the lab's user: the lab's scripted
// browser with a copy of the lab's env.json that u may read.
func (w *installWorld) giveBrowser(u testUser) {
	b, err := os.ReadFile(filepath.Join(w.env.Dir, lab.EnvFile))
	if err != nil {
		w.t.Fatal(err)
	}
	dir := filepath.Join(u.home, "lab")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, lab.EnvFile), b, 0o600)
	script := "#!/bin/sh\nexec " + filepath.Join(w.base, "bin", "runos-lab") + " browser --dir " + dir + " \"$@\"\n"
	os.WriteFile(filepath.Join(u.home, "browser"), []byte(script), 0o755)
	for _, p := range []string{dir, filepath.Join(dir, lab.EnvFile), filepath.Join(u.home, "browser")} {
		os.Chown(p, u.uid, u.gid)
	}
}

func (w *installWorld) pid(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func processAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func (w *installWorld) statusAs(u testUser) *localapi.Status {
	w.t.Helper()
	out, err := w.as(u, "vpn", "status", "--json")
	if err != nil {
		w.t.Fatalf("status as %s: %v", u.name, err)
	}
	var st localapi.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		w.t.Fatalf("status --json as %s: %v\n%s", u.name, err, out)
	}
	return &st
}

// TestInstallService is issue 5's end-to-end test: the service installed
// for real, who may steer it, a crash, an upgrade, and an uninstall that
// leaves nothing behind.
func TestInstallService(t *testing.T) {
	w := newInstallWorld(t)
	resolvBefore := w.must("client", nil, "cat", "/etc/resolv.conf")

	// Without root it refuses at once and changes nothing.
	w.giveBrowser(w.operator)
	out, err := w.run("client", []string{"HOME=" + w.plain.home},
		"setpriv", "--reuid", strconv.Itoa(w.plain.uid), "--regid", strconv.Itoa(w.plain.gid), "--init-groups", "--",
		filepath.Join(w.base, "bin", "runos"), "vpn", "install", "--service-name", w.svc)
	if err == nil || !strings.Contains(out, "run it with sudo: sudo runos vpn install") {
		t.Fatalf("install without root: %v\n%s", err, out)
	}
	if len(w.clientFiles("/etc/init.d/"+w.svc)) != 0 {
		t.Fatal("a refused install registered the service")
	}

	// Install as root through sudo by the operator (SUDO_USER), trusting
	// the lab's CA.
	out = w.mustInstall([]string{"SUDO_USER=" + w.operator.name}, "--ca-file", w.env.CAFile)
	for _, want := range []string{"Installed the RunOS VPN service " + w.svc + " (unix-systemv)", "operator  " + w.operator.name, "Next: runos vpn up"} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q", want)
		}
	}
	if fi, err := os.Stat(w.stateDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.stateDir, "operator.json")); !strings.Contains(string(b), `"user":"`+w.operator.name+`"`) {
		t.Errorf("operator.json: %s", b)
	}
	// Registered with System V init and running.
	if perm := w.clientFiles("/etc/init.d/" + w.svc)["/etc/init.d/"+w.svc]; perm != "755" {
		t.Fatalf("init script: mode %q on the laptop, want 755", perm)
	}
	if links := w.clientFiles("/etc/rc2.d/S50" + w.svc); len(links) != 1 {
		t.Error("not linked into runlevel 2")
	}
	if _, err := os.Stat("/etc/init.d/" + w.svc); err == nil {
		t.Error("the install reached the machine's /etc/init.d, not only the laptop's")
	}
	if out := w.must("client", nil, "service", w.svc, "status"); !strings.Contains(out, "Running") {
		t.Errorf("service status: %s", out)
	}
	supervisor, daemon := w.pid(w.pidFile), w.pid(w.pidFile+".daemon")
	if !processAlive(supervisor) || !processAlive(daemon) {
		t.Fatalf("supervisor %d / daemon %d not running", supervisor, daemon)
	}

	// Anyone reads the status through the socket.
	st := w.statusAs(w.plain)
	if st.Session.State != localapi.SessionSignedOut || st.Tunnel.Interface != "wg1" || !st.Tunnel.Up {
		t.Errorf("status as %s: %+v", w.plain.name, st)
	}

	// The operator may steer: sign-in, up and connect, with real handshakes.
	if out, err := w.as(w.operator, "vpn", "up", "--cid", "ky3"); err != nil {
		t.Fatalf("vpn up as the operator: %v\n%s", err, out)
	}
	if out, err := w.as(w.operator, "vpn", "connect", "xym"); err != nil {
		t.Fatalf("vpn connect as the operator: %v\n%s", err, out)
	}
	w.waitStatus("client", 30*time.Second, "ky3 and xym up", upOn("", "ky3", "xym"))

	grant := "sudo runos vpn install --operator " + w.plain.name
	// runos vpn doctor sees the installed service starting at boot, and
	// who may steer: the operator gets fresh handshakes; another user is
	// told they may only read and how to be allowed, and gets the last
	// handshakes instead of a probe.
	for _, u := range []testUser{w.operator, w.plain} {
		out, _ := w.as(u, "vpn", "doctor", "--json", "--service-name", w.svc)
		var d doctorOut
		if i := strings.Index(out, "{"); i < 0 || json.NewDecoder(strings.NewReader(out[i:])).Decode(&d) != nil {
			t.Fatalf("doctor as %s:\n%s", u.name, out)
		}
		svc, _ := d.check("service")
		acc, _ := d.check("access")
		udp, _ := d.check("xym.udp")
		if svc.Status != "ok" || !strings.Contains(svc.Finding, w.svc+" (unix-systemv) is installed and starts at boot") || udp.Status != "ok" {
			t.Errorf("doctor as %s: service %+v, xym.udp %+v\n%s", u.name, svc, udp, d)
		}
		if u == w.plain && (acc.Status != "warn" || !strings.Contains(acc.Fix, grant) || !strings.Contains(udp.Finding, "you may only read")) {
			t.Errorf("doctor as %s: access %+v, udp %+v", u.name, acc, udp)
		}
		if u == w.operator && (acc.Status != "ok" || !strings.Contains(udp.Finding, "fresh WireGuard handshake")) {
			t.Errorf("doctor as %s: access %+v, udp %+v", u.name, acc, udp)
		}
	}

	// Another user reads but may not steer, and is told what grants it.
	if st := w.statusAs(w.plain); !upOn("", "ky3", "xym")(st) {
		t.Errorf("status as %s: %+v", w.plain.name, st.Clusters)
	}
	for _, args := range [][]string{{"vpn", "connect", "ky3"}, {"vpn", "up", "--cid", "ky3"}} {
		// Disconnect first (as the operator) so that the command has a
		// change to ask for.
		w.as(w.operator, "vpn", "disconnect", "ky3")
		out, err := w.as(w.plain, args...)
		if err == nil || !strings.Contains(out, "may only read the VPN status") || !strings.Contains(out, grant) {
			t.Errorf("runos %s as %s: %v\n%s", strings.Join(args, " "), w.plain.name, err, out)
		}
		if st := w.statusAs(w.plain); upOn("", "ky3")(st) {
			t.Errorf("a refused %s connected ky3", strings.Join(args, " "))
		}
	}
	if out, err := w.as(w.plain, "vpn", "down"); err == nil || !strings.Contains(out, grant) {
		t.Errorf("vpn down as %s: %v\n%s", w.plain.name, err, out)
	}
	if out, err := w.as(w.operator, "vpn", "connect", "ky3"); err != nil {
		t.Fatalf("reconnect as the operator: %v\n%s", err, out)
	}

	// A web page cannot drive the daemon: a request with an Origin header
	// is refused, even for root, reads included.
	sock := "/run/runos/vpnd.sock"
	for _, req := range [][]string{
		{"http://local.runos/v1/status"},
		{"-X", "POST", "-H", "Content-Type: application/json", "--data-binary", `{"cid":"xym"}`, "http://local.runos/v1/disconnect"},
	} {
		argv := append([]string{"curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", sock,
			"-H", "Origin: https://evil.example"}, req...)
		out := w.must("client", nil, argv...)
		if !strings.HasSuffix(strings.TrimSpace(out), "403") || !strings.Contains(out, "web pages") {
			t.Errorf("%s with an Origin header: %s", req[len(req)-1], out)
		}
	}
	if st := w.statusAs(w.plain); !upOn("", "xym")(st) {
		t.Error("the refused request disconnected xym")
	}

	// A crash: the supervisor cleans up and starts the daemon again, which
	// reconnects the clusters by itself.
	if err := syscall.Kill(daemon, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w.waitFor(30*time.Second, "the daemon restarted", func() bool {
		p := w.pid(w.pidFile + ".daemon")
		return p != daemon && processAlive(p)
	})
	w.waitStatus("client", 60*time.Second, "ky3 and xym up after the crash", upOn("", "ky3", "xym"))

	// Again as root, no sudo: an upgrade in place, the operator kept.
	out = w.mustInstall(nil)
	if !strings.Contains(out, "Upgraded the RunOS VPN service") || !strings.Contains(out, "operator  "+w.operator.name) {
		t.Errorf("upgrade output:\n%s", out)
	}
	if processAlive(supervisor) || processAlive(daemon) {
		t.Error("the old processes survived the upgrade")
	}
	w.waitStatus("client", 60*time.Second, "ky3 and xym up after the upgrade", upOn("", "ky3", "xym"))
	key, err := os.ReadFile(filepath.Join(w.stateDir, "device.key"))
	if err != nil {
		t.Fatal(err)
	}
	if w.must("client", nil, "cat", "/etc/resolv.conf") == resolvBefore {
		t.Error("no split DNS while connected: resolv.conf is as before")
	}

	// Uninstall while connected: no service, process, socket, tunnel or
	// DNS change left; the device key stays.
	supervisor, daemon = w.pid(w.pidFile), w.pid(w.pidFile+".daemon")
	out, err = w.uninstall(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Uninstalled the RunOS VPN service "+w.svc) || !strings.Contains(out, "device key stays") {
		t.Errorf("uninstall output:\n%s", out)
	}
	if len(w.clientFiles("/etc/init.d/"+w.svc)) != 0 {
		t.Error("init script left")
	}
	if links := w.clientFiles("/etc/rc[0-6].d/[SK][0-9][0-9]" + w.svc); len(links) != 0 {
		t.Errorf("runlevel links left: %v", links)
	}
	for _, pid := range []int{supervisor, daemon} {
		if processAlive(pid) {
			t.Errorf("process %d left", pid)
		}
	}
	for _, f := range []string{w.pidFile, w.pidFile + ".daemon", filepath.Join(w.env.Dir, "hosts", "client", "run", "vpnd.sock")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left", f)
		}
	}
	if _, err := w.run("client", nil, "ip", "link", "show", "wg1"); err == nil {
		t.Error("wg1 left")
	}
	if got := w.must("client", nil, "cat", "/etc/resolv.conf"); got != resolvBefore {
		t.Errorf("resolv.conf not restored:\n%s\nwant:\n%s", got, resolvBefore)
	}
	if b, err := os.ReadFile(filepath.Join(w.stateDir, "device.key")); err != nil || !bytes.Equal(b, key) {
		t.Errorf("device key not kept: %v", err)
	}
	if out, err := w.as(w.plain, "vpn", "status"); err == nil || !strings.Contains(out, "sudo runos vpn install") {
		t.Errorf("status with no daemon: %v\n%s", err, out)
	}

	// --purge takes the key, the state and the log; nothing is installed.
	out, err = w.uninstall(nil, "--purge")
	if err != nil || !strings.Contains(out, "was not installed") {
		t.Errorf("purge: %v\n%s", err, out)
	}
	for _, p := range []string{w.stateDir, w.logFile} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after --purge", p)
		}
	}
}

func (w *installWorld) mustInstall(env []string, args ...string) string {
	w.t.Helper()
	out, err := w.install(env, args...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("install:\n%s", out)
	return out
}
