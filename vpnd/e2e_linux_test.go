package vpnd

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/internal/wgtest"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/store"
)

func peerUp(cid string) func(*localapi.Status) bool {
	return func(st *localapi.Status) bool { return cluster(*st, cid).PeerUp }
}

// TestDaemonReal runs the real daemon (wireguard-go on a TUN device in a
// laptop namespace) against a fake control over HTTPS and stock WireGuard
// servers: hand-over, connect, the stock wg reading the interface, pages
// through the tunnel, a second cluster, a move to another server with no
// local action, restart without a new session, session expiry, the next
// sign-in restoring, down, and the clean-up after a crash.
func TestDaemonReal(t *testing.T) {
	if part := wgtest.Inside(); part != "" {
		insideDaemon(t, part)
		return
	}
	l := newLab(t)
	ctx := context.Background()

	// A left-over interface of the same name (a crash of a daemon whose
	// TUN device was made persistent) is removed at start.
	l.laptop.MustExec("ip", "tuntap", "add", "dev", l.iface, "mode", "tun")
	l.start()
	st, err := l.client.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Session.State != localapi.SessionSignedOut || !st.Tunnel.Up || st.Tunnel.Interface != l.iface || st.DNS.Mode != "off" {
		t.Fatalf("fresh daemon: %+v", st)
	}
	if b, _ := os.ReadFile(filepath.Join(l.stateDir, "cleanup.log")); string(b) != "daemon\n" {
		t.Errorf("Run did not run the DNS clean-up first: %q", b)
	}
	checkMode(t, l.stateDir, 0o700)
	checkMode(t, filepath.Join(l.stateDir, store.KeyFile), 0o600)
	if out := l.laptop.MustExec("wg", "show", l.iface); !strings.Contains(out, "interface: "+l.iface) || !strings.Contains(out, "public key: "+st.Tunnel.PublicKey) {
		t.Errorf("stock wg show on a fresh daemon:\n%s", out)
	}

	l.fc.AddSession("tok1", "alice@example.com", time.Hour)
	if _, err := l.client.SetSession(ctx, localapi.SessionRequest{APIURL: l.apiURL, AccessToken: "tok1"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := l.client.Connect(ctx, "ky3"); err != nil {
		t.Fatal(err)
	}
	st = l.waitStatus("ky3 peerUp", peerUp("ky3"))
	t.Logf("connect ky3 → peerUp: %v", time.Since(t0))
	c := cluster(*st, "ky3")
	if c.State != localapi.ClusterConnected || c.Server.NodeID != "n1" || c.Server.Address != "100.100.1.1" || c.LastHandshake.IsZero() {
		t.Errorf("ky3: %+v", c)
	}
	if !slices.Equal(st.Tunnel.Addresses, []string{"100.96.0.2/32"}) {
		t.Errorf("tunnel addresses %v", st.Tunnel.Addresses)
	}
	out := l.laptop.MustExec("wg", "show", l.iface)
	for _, want := range []string{"peer: " + l.servers["ky3/n1"].PublicKey(), "endpoint: 10.1.0.2:32768", "allowed ips: 100.100.1.0/24", "latest handshake"} {
		if !strings.Contains(out, want) {
			t.Errorf("stock wg show lacks %q:\n%s", want, out)
		}
	}
	if page, err := l.curl("http://100.100.1.1/"); err != nil || page != "cluster=ky3 node=n1\n" {
		t.Fatalf("page through the tunnel: %q %v", page, err)
	}
	l.laptop.MustExec("ping", "-c", "1", "-W", "5", "100.100.1.1")
	if routes := l.laptop.MustExec("ip", "route", "show", "dev", l.iface); !strings.Contains(routes, "100.100.1.0/24") {
		t.Errorf("routes of %s:\n%s", l.iface, routes)
	}

	// A second cluster at the same time, its own subnet.
	if _, err := l.client.Connect(ctx, "xym"); err != nil {
		t.Fatal(err)
	}
	l.waitStatus("both up", func(st *localapi.Status) bool { return peerUp("ky3")(st) && peerUp("xym")(st) })
	if page, err := l.curl("http://100.100.2.1/"); err != nil || page != "cluster=xym node=n1\n" {
		t.Fatalf("xym page: %q %v", page, err)
	}
	t.Logf("daemon RSS with two clusters connected: %d KiB", l.rssKB())

	// A move: control pushes n2's key and endpoint; nothing is done here.
	t0 = time.Now()
	l.move("ky3", "n2")
	l.waitStatus("ky3 on n2", func(st *localapi.Status) bool {
		c := cluster(*st, "ky3")
		return c.Server.NodeID == "n2" && c.PeerUp
	})
	t.Logf("move pushed → handshake with n2: %v", time.Since(t0))
	peers := strings.Fields(l.laptop.MustExec("wg", "show", l.iface, "peers"))
	slices.Sort(peers)
	want := []string{l.servers["ky3/n2"].PublicKey(), l.servers["xym/n1"].PublicKey()}
	slices.Sort(want)
	if !slices.Equal(peers, want) {
		t.Errorf("peers after the move %v, want %v", peers, want)
	}
	if page, err := l.curl("http://100.100.1.1/"); err != nil || page != "cluster=ky3 node=n2\n" {
		t.Fatalf("page after the move: %q %v", page, err)
	}

	// A peer removed by hand with the stock tool is put back.
	l.laptop.MustExec("wg", "set", l.iface, "peer", l.servers["xym/n1"].PublicKey(), "remove")
	l.waitStatus("xym peer put back", func(st *localapi.Status) bool {
		return strings.Contains(l.laptop.MustExec("wg", "show", l.iface, "peers"), l.servers["xym/n1"].PublicKey()) && peerUp("xym")(st)
	})

	// Restart: everything comes down, then back without a new session.
	keyFile, _ := os.ReadFile(filepath.Join(l.stateDir, store.KeyFile))
	logs := l.output()
	l.stop()
	if _, err := l.laptop.Exec("ip", "link", "show", l.iface); err == nil {
		t.Errorf("%s still exists after the daemon stopped", l.iface)
	}
	if _, err := os.Stat(l.socket); err == nil {
		t.Error("the socket is left after the daemon stopped")
	}
	me := l.fc.Calls("GET /v1/me")
	l.start()
	l.waitStatus("both back after restart", func(st *localapi.Status) bool { return peerUp("ky3")(st) && peerUp("xym")(st) })
	if l.fc.Calls("GET /v1/me") != me {
		t.Error("the restart needed a new session")
	}
	if page, err := l.curl("http://100.100.1.1/"); err != nil || page != "cluster=ky3 node=n2\n" {
		t.Fatalf("page after restart: %q %v", page, err)
	}

	// The session lapses on control: peers, routes go; wanted stays.
	l.fc.ExpireSession("tok1")
	st = l.waitStatus("expired", func(st *localapi.Status) bool { return st.Session.State == localapi.SessionExpired })
	if c := cluster(*st, "ky3"); c.State != localapi.ClusterDisconnected || !c.Wanted {
		t.Errorf("ky3 after expiry: %+v", c)
	}
	// Status says it at once; the applier takes the tunnel down right after.
	eventually(t, "no peers or routes after expiry", func() bool {
		return strings.TrimSpace(l.laptop.MustExec("wg", "show", l.iface, "peers")) == "" &&
			!strings.Contains(l.laptop.MustExec("ip", "route", "show", "dev", l.iface), "100.100.")
	})
	if _, err := l.curl("http://100.100.1.1/"); err == nil {
		t.Error("the page is reachable after the session lapsed")
	}

	// The next sign-in restores both clusters.
	l.fc.AddSession("tok2", "alice@example.com", time.Hour)
	if _, err := l.client.SetSession(ctx, localapi.SessionRequest{APIURL: l.apiURL, AccessToken: "tok2"}); err != nil {
		t.Fatal(err)
	}
	l.waitStatus("restored", func(st *localapi.Status) bool { return peerUp("ky3")(st) && peerUp("xym")(st) })

	// Down: everything goes, here and on control; the key stays.
	st, err = l.client.EndSession(ctx)
	if err != nil || st.Session.State != localapi.SessionSignedOut {
		t.Fatalf("down: %v %+v", err, st)
	}
	if p := strings.TrimSpace(l.laptop.MustExec("wg", "show", l.iface, "peers")); p != "" {
		t.Errorf("peers after down: %s", p)
	}
	if l.fc.Calls("DELETE /v1/sessions/current") != 1 {
		t.Error("down did not end the session on control")
	}
	for name, s := range l.servers {
		if len(s.Peers()) != 0 {
			t.Errorf("server %s still has peers after down: %v", name, s.Peers())
		}
	}
	if k, _ := os.ReadFile(filepath.Join(l.stateDir, store.KeyFile)); string(k) != string(keyFile) {
		t.Error("the device key changed")
	}
	logs += l.output()
	if priv := strings.TrimSpace(string(keyFile)); priv == "" || strings.Contains(logs, priv) {
		t.Error("the daemon's logs contain the private key")
	}
	for _, tok := range []string{"tok1", "tok2"} {
		if strings.Contains(logs, "accessToken="+tok) || strings.Contains(logs, "Bearer "+tok) {
			t.Errorf("the daemon's logs contain the token %s", tok)
		}
	}

	// A crash: the UAPI socket and the tunnel record are left; --cleanup
	// removes them, and so does the next start.
	l.kill9()
	if _, err := os.Stat(filepath.Join(l.stateDir, tunnelFile)); err != nil {
		t.Error("no tunnel record after a crash")
	}
	wgtest.RunInside(t, l.laptop, "TestDaemonReal", "cleanup", "T_STATE="+l.stateDir, "T_SOCKET="+l.socket,
		"T_CA="+l.caFile, "T_IFACE="+l.iface)
	if _, err := os.Stat("/var/run/wireguard/" + l.iface + ".sock"); err == nil {
		t.Error("--cleanup left the UAPI socket")
	}
	if _, err := os.Stat(filepath.Join(l.stateDir, tunnelFile)); err == nil {
		t.Error("--cleanup left the tunnel record")
	}
	if _, err := l.laptop.Exec("ip", "link", "show", l.iface); err == nil {
		t.Error("--cleanup left the interface")
	}
	if b, _ := os.ReadFile(filepath.Join(l.stateDir, "cleanup.log")); !strings.HasSuffix(string(b), "daemon\ncleanup\n") {
		t.Errorf("--cleanup did not run the DNS clean-up: %q", b)
	}
	l.start()
	if st, err := l.client.Status(ctx); err != nil || st.Session.State != localapi.SessionSignedOut {
		t.Errorf("after the crash and a fresh start: %v %+v", err, st)
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Error(err)
		return
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
	}
}
