package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestRealDaemon runs the built `runos vpnd` in a network namespace of its
// own and drives it with the commands: the status table and JSON from the
// real daemon, the refusal to connect while signed out, version agreement,
// and `vpnd --cleanup` refusing while the daemon runs.
func TestRealDaemon(t *testing.T) {
	netnstest.Require(t, "ip")
	bin := filepath.Join(t.TempDir(), "runos")
	build := exec.Command("go", "build", "-o", bin, "github.com/runos/vpn/cmd/runos")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build runos: %v\n%s", err, out)
	}
	ns := netnstest.New(t, "cli")
	sockDir, err := os.MkdirTemp("", "rcli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "vpnd.sock")
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	iface := "wgc" + hex.EncodeToString(b) // unique: UAPI sockets are shared by all namespaces
	state := filepath.Join(t.TempDir(), "state")
	ns.Start(nil, bin, "vpnd", "--state-dir", state, "--socket", sock, "--interface", iface, "--log-level", "debug")

	// Wait for the socket to answer.
	c := localapi.NewClient(sock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err := c.Status(ctx); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the daemon never answered on %s", sock)
		case <-time.After(50 * time.Millisecond):
		}
	}

	h := newHarness(t)
	h.env["RUNOS_VPND_SOCKET"] = sock
	h.run("vpn", "status").want(t, 0, []string{"Session   signed out; run `runos vpn up` to sign in", "Tunnel    down: signed out (" + iface + " carries nothing until runos vpn up)"}, nil)
	r := h.run("vpn", "status", "--json")
	var st localapi.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	if st.Session.State != localapi.SessionSignedOut || st.Tunnel.Interface != iface {
		t.Errorf("status %+v", st)
	}
	if st.Access == nil || !st.Access.Control {
		t.Errorf("root's access %+v", st.Access)
	}
	if r := h.run("vpn", "status"); strings.Contains(r.stdout, "may only read") {
		t.Errorf("root told it may only read:\n%s", r.stdout)
	}
	h.run("vpn", "connect", "ky3").want(t, 1, nil, []string{"connect ky3: not signed in: run `runos vpn up` first"})

	// Another real user (nobody, seen by the daemon through SO_PEERCRED)
	// is told in the status that it may only read, and how to get access;
	// up stops before any sign-in.
	os.Chmod(sockDir, 0o755)
	binDir, err := os.MkdirTemp("", "rcli-bin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	os.Chmod(binDir, 0o755)
	pub := filepath.Join(binDir, "runos")
	if b, err := os.ReadFile(bin); err != nil || os.WriteFile(pub, b, 0o755) != nil {
		t.Fatalf("copy runos for another user: %v", err)
	}
	asNobody := func(args ...string) (string, error) {
		cmd := exec.Command(pub, args...)
		cmd.Env = []string{"RUNOS_VPND_SOCKET=" + sock, "HOME=" + binDir, "PATH=/usr/bin:/bin", "RUNOS_API_URL=https://198.51.100.10"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	said, err := asNobody("vpn", "status")
	if err != nil || !strings.Contains(said, "Access    you may only read the VPN status; to change it, ask an administrator to run: sudo runos vpn install --operator nobody") {
		t.Errorf("vpn status as nobody: %v\n%s", err, said)
	}
	said, err = asNobody("vpn", "up", "--no-browser")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitError || !strings.Contains(said, "nobody (uid 65534) may only read the VPN status") ||
		strings.Contains(said, "code") {
		t.Errorf("vpn up as nobody: %v\n%s", err, said)
	}
	r = h.run("version", "--json")
	r.want(t, 0, []string{`"mismatch": false`}, nil)
	// The real binary, not the harness's recording daemon.
	out, err := exec.Command(bin, "vpnd", "--cleanup", "--state-dir", state, "--socket", sock).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitError || !strings.Contains(string(out), "the daemon is running") {
		t.Errorf("vpnd --cleanup while running: %v\n%s", err, out)
	}

	// The key stays on the machine, 0600 in a 0700 directory.
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir: %v %v", fi.Mode(), err)
	}
}
