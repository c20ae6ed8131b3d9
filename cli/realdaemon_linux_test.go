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
	h.run("vpn", "status").want(t, 0, []string{"Session   signed out; run `runos vpn up` to sign in", "Tunnel    " + iface}, nil)
	r := h.run("vpn", "status", "--json")
	var st localapi.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	if st.Session.State != localapi.SessionSignedOut || st.Tunnel.Interface != iface {
		t.Errorf("status %+v", st)
	}
	h.run("vpn", "connect", "ky3").want(t, 1, nil, []string{"connect ky3: not signed in: run `runos vpn up` first"})
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
