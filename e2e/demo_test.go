//go:build !windows

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
)

// TestDemo runs `runos-lab demo`, what `make demo` runs after building, as
// a user would: it must walk through every step of the main job (sign-in
// through the login page, up, status, the page through the tunnel, split
// DNS, a second cluster, a move, disconnect, down) without input, exit 0,
// and remove its lab.
func TestDemo(t *testing.T) {
	netnstest.Require(t, "ip", "unshare", "nsenter", "findmnt", "dnsmasq", "wg", "wireguard-go", "curl", "getent")
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "runos-lab"), "demo")
	out, err := cmd.CombinedOutput()
	t.Logf("runos-lab demo:\n%s", out)
	if err != nil {
		t.Fatalf("runos-lab demo: %v", err)
	}
	text := string(out)
	for _, want := range []string{
		"Control   https://198.51.100.10\nSession   signed in as ops@rjwrn.example.com",
		"cluster=ky3 node=n1",                           // the page through the tunnel
		"100.100.1.1     traefik.ky3.rjwrn.example.com", // split DNS
		"192.0.2.80      www.example.test",              // everything else as before
		"xym is up: VPN server n1",
		"xym: shadowed 10.10.0.0/24 (by ky3)", // overlap, in status
		"curl -sS --max-time 10 http://web.default.svc.xym.rjwrn.example.com/\ncluster=xym node=n1", // a Service by name
		"default       web-n2", // kubectl get pods -A on ky3
		"Done: 1/1 devices switched",
		"cluster=ky3 node=n2", // the same address after the move
		"Disconnected xym.",
		"Disconnected every cluster and ended the session.",
		"Session   signed out",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo did not show %q", want)
		}
	}
	m := regexp.MustCompile(`removed the lab in (\S+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("the demo did not say it removed its lab")
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("the demo's lab directory %s is still there (%v)", m[1], err)
	}
}
