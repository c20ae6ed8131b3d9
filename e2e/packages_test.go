//go:build !windows

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/localapi"
)

// pkgBox is a machine of its own for installing packages as a new user
// would, without touching this one: a mount and network namespace whose
// /etc, /usr and /var are overlays of the machine's (apt, dpkg's database,
// the init scripts and the users all land in the upper layers) and whose
// /run is empty. Every command runs in it through nsenter.
type pkgBox struct {
	t      *testing.T
	holder *exec.Cmd
	pid    string
}

func newPkgBox(t *testing.T) *pkgBox {
	t.Helper()
	dir := t.TempDir()
	var script strings.Builder
	script.WriteString("set -e\nmount --make-rprivate /\n")
	for _, d := range []string{"etc", "usr", "var"} {
		up, work := filepath.Join(dir, d, "up"), filepath.Join(dir, d, "work")
		os.MkdirAll(up, 0o755)
		os.MkdirAll(work, 0o755)
		script.WriteString("mount -t overlay pkg-" + d + " -o lowerdir=/" + d + ",upperdir=" + up + ",workdir=" + work + " /" + d + "\n")
	}
	script.WriteString("mount -t tmpfs pkg-run /run\nmkdir -p /run/lock\nip link set lo up\necho ready\nexec sleep 1000000\n")
	b := &pkgBox{t: t, holder: exec.Command("unshare", "--mount", "--net", "sh", "-c", script.String())}
	out, err := b.holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	b.holder.Stderr = &stderr
	if err := b.holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever still runs in the box (a failed test's daemon) goes
		// with it: the namespace lives as long as any process in it.
		for _, p := range b.processes() {
			if pid, err := strconv.Atoi(strings.SplitN(p, ":", 2)[0]); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		b.holder.Process.Kill()
		b.holder.Wait()
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		b.holder.Wait()
		t.Fatalf("the package box did not come up: %q %s", line, stderr.String())
	}
	b.pid = itoa(b.holder.Process.Pid)
	return b
}

func itoa(i int) string { return strconv.Itoa(i) }

// run runs argv in the box.
func (b *pkgBox) run(argv ...string) (string, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", b.pid, "-m", "-n", "--"}, argv...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.Env = slices.DeleteFunc(cmd.Env, func(e string) bool { return strings.HasPrefix(e, "SUDO_USER=") })
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (b *pkgBox) must(argv ...string) string {
	b.t.Helper()
	out, err := b.run(argv...)
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return out
}

// exists says whether path exists in the box.
func (b *pkgBox) exists(path string) bool {
	_, err := b.run("test", "-e", path)
	return err == nil
}

// processes lists the processes in the box besides its holder: those in
// its mount namespace.
func (b *pkgBox) processes() []string {
	ns, err := os.Readlink("/proc/" + b.pid + "/ns/mnt")
	if err != nil {
		b.t.Fatal(err)
	}
	ents, _ := os.ReadDir("/proc")
	var ps []string
	for _, e := range ents {
		if e.Name() == b.pid {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err == nil && l == ns {
			cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			ps = append(ps, e.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return ps
}

// buildDebs builds this machine's .deb packages from the programs the
// e2e tests built (make packages does the same from make cross's).
func buildDebs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	arch := filepath.Join(dir, "bin", "linux-"+runtime.GOARCH)
	os.MkdirAll(arch, 0o755)
	for _, p := range []string{"runos", "runos-control", "runos-gateway"} {
		// Copies, not links: nfpm would package a link as a link.
		b, err := os.ReadFile(filepath.Join(binDir, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(arch, p), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	abs, _ := filepath.Abs("..")
	cmd := exec.Command("go", "run", ".", "-bin", filepath.Join(dir, "bin"), "-root", abs, "-out", filepath.Join(dir, "dist"),
		"-version", "0.9.0", "-arch", runtime.GOARCH, "-format", "deb")
	cmd.Dir = filepath.Join(abs, "packaging")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the packages: %v\n%s", err, out)
	}
	return filepath.Join(dir, "dist")
}

// TestPackageInstallPurge installs the runos .deb as a new user would
// (apt-get install ./runos_….deb), runs runos version, sudo runos vpn
// install and runos vpn status through the daemon's socket, then purges
// the package: every file the package and the service put down is gone,
// and no user, socket or process is left. The same for runos-control and
// runos-gateway: their system users come and go, and nothing starts.
func TestPackageInstallPurge(t *testing.T) {
	netnstest.Require(t, "apt-get", "dpkg", "unshare", "nsenter", "ip", "service")
	dist := buildDebs(t)
	b := newPkgBox(t)
	passwd, group := b.must("cat", "/etc/passwd"), b.must("cat", "/etc/group")

	deb, _ := filepath.Glob(filepath.Join(dist, "runos_*.deb"))
	if len(deb) != 1 {
		t.Fatalf("runos_*.deb: %v", deb)
	}
	b.must("apt-get", "install", "-y", "--no-install-recommends", deb[0])
	if out := b.must("runos", "version"); !strings.Contains(out, "runos") {
		t.Errorf("runos version: %s", out)
	}
	if ps := b.processes(); len(ps) > 0 {
		t.Errorf("installing the package started %v", ps)
	}
	installed := b.must("dpkg", "-L", "runos")
	for _, f := range []string{"/usr/bin/runos", "/usr/share/man/man1/runos-vpn-up.1.gz", "/usr/share/bash-completion/completions/runos"} {
		if !strings.Contains(installed, f+"\n") {
			t.Errorf("dpkg -L runos lacks %s", f)
		}
	}
	out := b.must("runos", "vpn", "install")
	if !strings.Contains(out, "/usr/bin/runos vpnd") {
		t.Errorf("the service does not run the package's runos:\n%s", out)
	}
	var st localapi.Status
	if err := json.Unmarshal([]byte(b.must("runos", "vpn", "status", "--json")), &st); err != nil {
		t.Fatalf("vpn status --json: %v", err)
	}
	if st.Version == "" {
		t.Errorf("status through the socket has no daemon version: %+v", st)
	}
	// What the service put down besides the package's files.
	service := []string{"/etc/init.d/runos-vpnd", "/var/lib/runos", "/run/runos/vpnd.sock"}
	for _, p := range service {
		if !b.exists(p) {
			t.Errorf("after runos vpn install, %s does not exist", p)
		}
	}
	if len(b.processes()) == 0 {
		t.Error("no daemon runs after runos vpn install")
	}

	b.must("apt-get", "purge", "-y", "runos")
	var left []string
	for _, p := range strings.Split(strings.TrimSpace(installed), "\n") {
		if p == "/." || !b.exists(p) {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			continue // a directory the machine had before (/usr/bin) stays
		}
		left = append(left, p)
	}
	for _, p := range append(service, "/run/runos", "/var/log/runos-vpnd.log", "/var/run/runos-vpnd.pid") {
		if b.exists(p) {
			left = append(left, p)
		}
	}
	if out, _ := b.run("sh", "-c", "ls /etc/rc*.d | grep runos"); strings.TrimSpace(out) != "" {
		left = append(left, "runlevel links: "+out)
	}
	if len(left) > 0 {
		t.Errorf("apt-get purge runos left %v", left)
	}
	if ps := b.processes(); len(ps) > 0 {
		t.Errorf("apt-get purge runos left processes %v", ps)
	}
	if b.must("cat", "/etc/passwd") != passwd || b.must("cat", "/etc/group") != group {
		t.Error("apt-get purge runos left the users or groups changed")
	}

	testServerPackages(t, b, dist, passwd, group)
}

// testServerPackages: runos-control and runos-gateway add their system
// user and configuration, start nothing, and purge takes them away.
func testServerPackages(t *testing.T, b *pkgBox, dist, passwd, group string) {
	for _, name := range []string{"control", "gateway"} {
		deb, _ := filepath.Glob(filepath.Join(dist, "runos-"+name+"_*.deb"))
		if len(deb) != 1 {
			t.Fatalf("runos-%s_*.deb: %v", name, deb)
		}
		b.must("apt-get", "install", "-y", "--no-install-recommends", deb[0])
		user := "runos-" + name
		if _, err := b.run("getent", "passwd", user); err != nil {
			t.Errorf("installing %s added no user %s", user, user)
		}
		if out := b.must("stat", "-c", "%a %G", "/etc/runos/"+name+".env"); out != "640 "+user+"\n" {
			t.Errorf("/etc/runos/%s.env: %s", name, out)
		}
		if out := b.must("stat", "-c", "%a %U", "/var/lib/"+user); out != "700 "+user+"\n" {
			t.Errorf("/var/lib/%s: %s", user, out)
		}
		if ps := b.processes(); len(ps) > 0 {
			t.Errorf("installing %s started %v", user, ps)
		}
		b.must("apt-get", "purge", "-y", user)
		for _, p := range []string{"/usr/bin/" + user, "/etc/runos", "/var/lib/" + user, "/lib/systemd/system/" + user + ".service"} {
			if b.exists(p) {
				t.Errorf("apt-get purge %s left %s", user, p)
			}
		}
	}
	if b.must("cat", "/etc/passwd") != passwd || b.must("cat", "/etc/group") != group {
		t.Error("purging runos-control and runos-gateway left their users or groups")
	}
}
