//go:build linux

package apptest

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/desktop/menu"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

var (
	labBinOnce sync.Once
	labBin     string
	labBinErr  error
)

// labBinaries builds the programs a lab runs plus runos-desktop into one
// directory (the lab puts it first on the laptops' PATH).
func labBinaries(t *testing.T) string {
	t.Helper()
	labBinOnce.Do(func() {
		d, err := os.MkdirTemp("", "runos-desktop-lab-bin")
		if err != nil {
			labBinErr = err
			return
		}
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = "/usr/local/go/bin/go"
		}
		cmd := exec.Command(gobin, "build", "-o", d+"/", "github.com/runos/vpn/cmd/runos", "github.com/runos/vpn/cmd/runos-control",
			"github.com/runos/vpn/cmd/runos-gateway", "github.com/runos/vpn/cmd/runos-lab", "github.com/runos/vpn/cmd/runos-desktop")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			labBinErr = err
			t.Logf("%s", out)
		}
		labBin = d
	})
	if labBinErr != nil {
		t.Fatalf("building the lab's programs: %v", labBinErr)
	}
	return labBin
}

// labWorld is a lab (control, gateways, a laptop running the real daemon)
// with a desktop session for the laptop's user: a session bus and a tray.
type labWorld struct {
	l       *lab.Lab
	bus     *bus
	watcher *watcher
	run     string // the user's XDG_RUNTIME_DIR
}

func newLabWorld(t *testing.T, ttl time.Duration) *labWorld {
	t.Helper()
	netnstest.Require(t, "ip", "unshare", "nsenter", "findmnt", "dnsmasq", "wg", "wireguard-go", "dbus-daemon")
	bin := labBinaries(t)
	dir := filepath.Join(shortTemp(t), "lab")
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, lab.Options{Dir: dir, BinDir: bin, SessionTTL: ttl, Progress: &progress})
	if err != nil {
		t.Fatalf("lab up: %v\n%s", err, progress.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
			for _, f := range logs {
				b, _ := os.ReadFile(f)
				lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
				t.Logf("--- %s (end):\n%s", filepath.Base(f), strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
		if err := lab.Down(context.Background(), dir, lab.DownOptions{}); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	w := &labWorld{l: l, run: filepath.Join(shortTemp(t), "run")}
	if err := os.Mkdir(w.run, 0o700); err != nil {
		t.Fatal(err)
	}
	w.bus = startBus(t)
	w.watcher = startWatcher(t, w.bus)
	return w
}

// desktop starts runos-desktop inside the laptop, as its user would.
func (w *labWorld) desktop(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd, err := w.l.Command(context.Background(), "client",
		[]string{"DBUS_SESSION_BUS_ADDRESS=" + w.bus.addr, "XDG_RUNTIME_DIR=" + w.run}, append([]string{"runos-desktop"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return startCmd(t, cmd)
}

// cli runs the real runos CLI on the laptop.
func (w *labWorld) cli(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, err := w.l.Command(ctx, "client", nil, append([]string{"runos"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("runos %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (w *labWorld) status(t *testing.T) *localapi.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := localapi.NewClient(w.l.SocketPath("client")).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func peerUp(st *localapi.Status, cid string) bool {
	for _, c := range st.Clusters {
		if c.CID == cid {
			return c.State == localapi.ClusterConnected && c.PeerUp
		}
	}
	return false
}

// launches are the lab browser's launches by the client id in the URL.
func (w *labWorld) launches(t *testing.T, clientID string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.l.Dir(), "hosts", "client", lab.BrowserLaunches))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if u, err := url.Parse(f[len(f)-1]); err == nil && u.Query().Get("client_id") == clientID {
			n++
		}
	}
	return n
}

// The whole thing against the real daemon in a lab: the toggle signs in
// through the real login page (the lab's scripted browser as $BROWSER) and
// connects the default cluster over a real WireGuard handshake; rows
// connect and disconnect clusters; a daemon restart is followed; the
// toggle's Disconnect ends the session.
func TestWithTheLabDaemon(t *testing.T) {
	w := newLabWorld(t, 0)
	w.cli(t, "config", "set", "cid", "ky3")
	app := w.desktop(t)
	reg := w.watcher.next(t)
	m := readMenu(t, w.bus.conn(t), reg)

	items := m.until("Connect", all(has(menu.TitleSignInNeeded), has(menu.TitleConnect)))
	toggle, _ := find(items, menu.TitleConnect)
	m.click(toggle)
	m.until("signed in and ky3 up", all(hasPrefix("Signed in as ops@rjwrn.example.com until "), checked("ky3", true), has("ky3"), has(menu.TitleDisconnect)))
	if st := w.status(t); !peerUp(st, "ky3") {
		t.Fatalf("the daemon has no handshake with ky3: %+v", st.Clusters)
	}
	if n := w.launches(t, "runos-desktop"); n != 1 {
		t.Fatalf("%d browser launches by the desktop, want 1", n)
	}

	items = m.until("the xym row", has("xym"))
	xym, _ := find(items, "xym")
	m.click(xym)
	m.until("xym up", checked("xym", true))
	items = m.until("the ky3 row", has("ky3"))
	ky3, _ := find(items, "ky3")
	m.click(ky3)
	m.until("ky3 down, xym up", all(checked("ky3", false), checked("xym", true)))
	if st := w.status(t); peerUp(st, "ky3") || !peerUp(st, "xym") {
		t.Fatalf("daemon clusters %+v", st.Clusters)
	}

	// The daemon restarts: the menu says so, then follows it back (the
	// daemon restores xym by itself, no browser).
	if err := w.l.Stop("client", "vpnd", syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	m.until("the daemon gone", has("The RunOS VPN service is not running"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.l.Restart(ctx, "client", "vpnd"); err != nil {
		t.Fatal(err)
	}
	items = m.until("xym back", all(hasPrefix("Signed in as "), checked("xym", true)))

	toggle, _ = find(items, menu.TitleDisconnect)
	m.click(toggle)
	m.until("signed out", all(has(menu.TitleSignInNeeded), has(menu.TitleConnect)))
	if st := w.status(t); st.Session.State != localapi.SessionSignedOut {
		t.Fatalf("session %+v after Disconnect", st.Session)
	}
	if n := w.launches(t, "runos-desktop"); n != 1 {
		t.Fatalf("%d browser launches by the desktop, want 1", n)
	}
	items = visible(m.layout())
	quit, _ := find(items, menu.TitleQuit)
	m.click(quit)
	select {
	case <-app.done:
	case <-time.After(30 * time.Second):
		t.Fatal("Quit did not end runos-desktop")
	}
}

// The same without a cid configured, against the real daemon and control:
// the daemon starts a new session with no cluster listed, so the toggle
// asks control for the account's clusters with the fresh token (two here:
// it says how to choose, and a row connects one). When the sign-in (here
// 30 s) lapses with both clusters connected, "Sign in…" signs in again and
// the daemon restores both by itself: nothing to choose.
func TestWithTheLabDaemonNoCID(t *testing.T) {
	const ttl = 30 * time.Second
	w := newLabWorld(t, ttl)
	app := w.desktop(t)
	m := readMenu(t, w.bus.conn(t), w.watcher.next(t))

	items := m.until("Connect", all(has(menu.TitleSignInNeeded), has(menu.TitleConnect)))
	toggle, _ := find(items, menu.TitleConnect)
	m.click(toggle)
	items = m.until("signed in, asked to choose", all(hasPrefix("Signed in as ops@rjwrn.example.com until "),
		hasPrefix("Failed: connect: choose a cluster: your account has 2 clusters (ky3,"), has("ky3"), has("xym")))
	if n := w.launches(t, "runos-desktop"); n != 1 {
		t.Fatalf("%d browser launches by the desktop, want 1", n)
	}
	xym, _ := find(items, "xym")
	m.click(xym)
	items = m.until("xym up", all(checked("xym", true), has("ky3")))
	ky3, _ := find(items, "ky3")
	m.click(ky3)
	m.until("both up", all(checked("ky3", true), checked("xym", true)))

	// The sign-in lapses (ttl after it began); the user signs in again
	// from the toggle.
	items = m.untilFor("the lapse", ttl+30*time.Second, all(has(menu.TitleSignInNeeded), has(menu.TitleSignIn)))
	signIn, _ := find(items, menu.TitleSignIn)
	m.click(signIn)
	items = m.until("both back", all(hasPrefix("Signed in as "), checked("ky3", true), checked("xym", true), has(menu.TitleDisconnect)))
	if i := slices.IndexFunc(items, func(n node) bool { return strings.HasPrefix(n.Label, "Failed") }); i >= 0 {
		t.Fatalf("after the sign-in: %q", labels(items))
	}
	if st := w.status(t); !peerUp(st, "ky3") || !peerUp(st, "xym") {
		t.Fatalf("daemon clusters %+v", st.Clusters)
	}
	if n := w.launches(t, "runos-desktop"); n != 2 {
		t.Fatalf("%d browser launches by the desktop, want 2", n)
	}
	if out := app.out.String(); !strings.Contains(out, "the daemon reconnects the clusters you had connected") {
		t.Fatalf("the desktop did not leave the restore to the daemon:\n%s", out)
	}
}

// At login against the real daemon: a valid session reconnects with no
// browser; once the 24-hour sign-in (here 25 s) lapses, a new login shows
// "Sign in…" and opens nothing, and a sign-in with the CLI is followed live.
func TestAtLoginWithTheLabDaemon(t *testing.T) {
	const ttl = 25 * time.Second
	w := newLabWorld(t, ttl)
	w.cli(t, "vpn", "up", "--cid", "ky3")
	app := w.desktop(t, "--at-login")
	m := readMenu(t, w.bus.conn(t), w.watcher.next(t))
	m.until("ky3 up at login", all(hasPrefix("Signed in as "), checked("ky3", true)))

	// The session lapses while the app runs; then the user logs in again.
	m.untilFor("the lapse", ttl+30*time.Second, all(has(menu.TitleSignInNeeded), has(menu.TitleSignIn)))
	_ = app.cmd.Process.Signal(syscall.SIGTERM)
	<-app.done
	w.desktop(t, "--at-login")
	m = readMenu(t, w.bus.conn(t), w.watcher.next(t))
	m.until("Sign in… at login", all(has(menu.TitleSignInNeeded), has(menu.TitleSignIn), checked("ky3", false)))
	if n := w.launches(t, "runos-desktop"); n != 0 {
		t.Fatalf("at login the desktop opened the browser %d times", n)
	}

	// The user signs in with the CLI: the menu follows.
	w.cli(t, "vpn", "up", "--cid", "ky3")
	m.until("signed in by the CLI", all(hasPrefix("Signed in as "), checked("ky3", true), has(menu.TitleDisconnect)))
	if n := w.launches(t, "runos-desktop"); n != 0 {
		t.Fatalf("the desktop opened the browser %d times", n)
	}
}
