//go:build !windows

package lab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/netnstest"
)

// binDir holds runos-lab built once for the root tests (the web app).
var binDir string

func TestMain(m *testing.M) {
	code := func() int {
		if os.Geteuid() == 0 {
			d, err := os.MkdirTemp("", "lab-test-bin-")
			if err != nil {
				panic(err)
			}
			defer os.RemoveAll(d)
			out, err := exec.Command("go", "build", "-o", d, "../cmd/runos-lab").CombinedOutput()
			if err != nil {
				os.Stderr.Write(out)
				return 1
			}
			binDir = d
		}
		return m.Run()
	}()
	os.Exit(code)
}

// upNetwork brings up a lab with only the lab's own programs (the web
// apps and the LAN resolver), torn down when the test ends.
func upNetwork(t *testing.T, clients int) *Lab {
	t.Helper()
	netnstest.Require(t, "ip", "unshare", "nsenter", "findmnt", "dnsmasq")
	dir := filepath.Join(t.TempDir(), "lab")
	var progress strings.Builder
	l, err := Up(context.Background(), Options{Dir: dir, Clients: clients, BinDir: binDir,
		Progress: &progress, Skip: []string{"control", "gateway", "vpnd"}})
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Down(context.Background(), dir, DownOptions{}); err != nil {
			t.Errorf("down: %v", err)
		}
	})
	return l
}
