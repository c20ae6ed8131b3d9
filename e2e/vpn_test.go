//go:build !windows

package e2e

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestVPNUpConnectRestartDown is issue 2's main path on one laptop:
// sign-in through the login form with PKCE, `vpn up` to a handshake, the
// stock wg tool reading wg1, the node's page through wg1 (and not without
// the tunnel), a second cluster at once, a daemon restart that reconnects
// both without a browser, and `vpn down` ending the session on the
// gateways too.
func TestVPNUpConnectRestartDown(t *testing.T) {
	w := newWorld(t, 1, 0)
	ky3, _ := w.env.Cluster("ky3")
	xym, _ := w.env.Cluster("xym")
	laptop := w.env.Client.Host

	// Signed out, nothing routes to the clusters' VPN subnets.
	if st := w.status(laptop); st.Session.State != localapi.SessionSignedOut {
		t.Fatalf("fresh daemon: session %q", st.Session.State)
	}
	if out, err := w.page(laptop, "http://100.100.1.1/"); err == nil {
		t.Fatalf("the VPN address answered with no tunnel: %s", out)
	}

	// Sign in: $BROWSER records the URL it is given, then the lab's
	// scripted browser fills and submits the real login form.
	rec := filepath.Join(t.TempDir(), "authorize-urls")
	wrapper := filepath.Join(t.TempDir(), "browser")
	labBrowser := filepath.Join(w.env.Dir, "hosts", laptop, "browser")
	os.WriteFile(wrapper, []byte("#!/bin/sh\necho \"$@\" >> "+rec+"\nexec "+labBrowser+" \"$@\"\n"), 0o755)
	w.must(laptop, []string{"BROWSER=" + wrapper}, "runos", "vpn", "up", "--cid", "ky3")
	urls := launches(t, rec)
	if len(urls) != 1 {
		t.Fatalf("browser launched %d times: %v", len(urls), urls)
	}
	u, err := url.Parse(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Path != "/oauth/authorize" || q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) < 43 ||
		!strings.HasPrefix(q.Get("redirect_uri"), "http://127.0.0.1:") || q.Get("response_type") != "code" {
		t.Errorf("authorize URL is not a PKCE S256 loopback request: %s", u)
	}
	if b, _ := os.ReadFile(filepath.Join(w.env.Dir, "hosts", laptop, lab.BrowserLaunches)); len(b) == 0 {
		t.Error("the scripted browser never ran")
	}

	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("n1", "ky3"))
	if st.Session.State != localapi.SessionSignedIn || st.Session.User != w.env.User {
		t.Errorf("session: %+v", st.Session)
	}
	if st.Tunnel.Interface != "wg1" || !st.Tunnel.Up || len(st.Tunnel.Addresses) == 0 {
		t.Errorf("tunnel: %+v", st.Tunnel)
	}
	if hours := time.Until(st.Session.ExpiresAt).Hours(); hours < 23 || hours > 24.1 {
		t.Errorf("session expires in %.1fh, want 24h", hours)
	}
	c, _ := cluster(st, "ky3")
	if c.Server.Endpoint != "10.77.0.21:32768" || c.Server.Address == "" || c.Server.PublicKey == "" {
		t.Errorf("ky3 server: %+v", c.Server)
	}

	// The stock tool reads wg1: the ky3 server is a peer with a handshake.
	out := w.must(laptop, nil, "wg", "show", "wg1", "latest-handshakes")
	if !strings.Contains(out, c.Server.PublicKey) || strings.Contains(out, c.Server.PublicKey+"\t0") {
		t.Errorf("wg show wg1 latest-handshakes has no handshake with %s:\n%s", c.Server.PublicKey, out)
	}

	// The page on ky3's VPN node, through wg1.
	if out := w.must(laptop, nil, "ip", "route", "get", c.Server.Address); !strings.Contains(out, "dev wg1") {
		t.Errorf("%s is not routed through wg1: %s", c.Server.Address, out)
	}
	if out, err := w.page(laptop, "http://"+c.Server.Address+"/"); err != nil || !strings.Contains(out, "cluster=ky3 node=n1") {
		t.Errorf("page through the tunnel: %q %v", out, err)
	}

	// A second cluster at once, with its own subnet.
	w.must(laptop, nil, "runos", "vpn", "connect", "xym")
	st = w.waitStatus(laptop, 30*time.Second, "connected to ky3 and xym", upOn("", "ky3", "xym"))
	c3, _ := cluster(st, "ky3")
	cx, _ := cluster(st, "xym")
	if c3.Subnet == "" || c3.Subnet == cx.Subnet || c3.Server.Address == cx.Server.Address {
		t.Errorf("ky3 and xym share a subnet or address: %s %s / %s %s", c3.Subnet, c3.Server.Address, cx.Subnet, cx.Server.Address)
	}
	if out, err := w.page(laptop, "http://"+cx.Server.Address+"/"); err != nil || !strings.Contains(out, "cluster=xym node=n1") {
		t.Errorf("xym page: %q %v", out, err)
	}
	if out, err := w.page(laptop, "http://"+c3.Server.Address+"/"); err != nil || !strings.Contains(out, "cluster=ky3 node=n1") {
		t.Errorf("ky3 page with both up: %q %v", out, err)
	}
	pub := st.Tunnel.PublicKey
	for _, h := range []string{"ky3-n1", "xym-n1"} {
		if pub == "" || !strings.Contains(w.gatewayPeers(h), pub) {
			t.Errorf("gateway %s does not list the laptop's key %q", h, pub)
		}
	}

	// Restart the daemon (kill by PID, start again): it reconnects both
	// clusters from what it remembered, and nothing opens a browser.
	stub, record := browserStub(t)
	old := w.pidOf(laptop, "vpnd")
	if err := w.lab.Stop(laptop, "vpnd", syscall.SIGKILL, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := w.lab.Restart(t.Context(), laptop, "vpnd"); err != nil {
		t.Fatal(err)
	}
	if w.pidOf(laptop, "vpnd") == old {
		t.Fatal("the daemon was not restarted")
	}
	w.waitStatus(laptop, 30*time.Second, "reconnected to ky3 and xym after a restart", upOn("", "ky3", "xym"))
	w.must(laptop, []string{"BROWSER=" + stub}, "runos", "vpn", "up")
	w.must(laptop, []string{"BROWSER=" + stub}, "runos", "vpn", "status")
	if l := launches(t, record); len(l) != 0 {
		t.Errorf("a browser was launched after the restart: %v", l)
	}
	if out, err := w.page(laptop, "http://"+c3.Server.Address+"/"); err != nil || !strings.Contains(out, "node=n1") {
		t.Errorf("page after the restart: %q %v", out, err)
	}

	// vpn down: signed out here, the peer gone from every gateway.
	w.must(laptop, nil, "runos", "vpn", "down")
	if st := w.status(laptop); st.Session.State != localapi.SessionSignedOut {
		t.Errorf("after down: session %q", st.Session.State)
	}
	for _, h := range []string{"ky3-n1", "xym-n1"} {
		w.waitFor(5*time.Second, "peer removed from "+h, func() bool { return !strings.Contains(w.gatewayPeers(h), pub) })
	}
	if out, err := w.page(laptop, "http://"+c3.Server.Address+"/"); err == nil {
		t.Errorf("the page is still reachable after vpn down: %s", out)
	}
	_ = ky3
	_ = xym
}
