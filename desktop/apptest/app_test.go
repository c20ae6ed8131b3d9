//go:build linux

package apptest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/desktop/internal/fakevpnd"
	"github.com/runos/vpn/desktop/menu"
	"github.com/runos/vpn/vpnd/localapi"
)

// world is one user's desktop session: a session bus with a tray host, a
// daemon, a config file and a BROWSER stub that records every launch.
type world struct {
	bus        *bus
	watcher    *watcher
	d          *fakevpnd.Daemon
	dir        string
	env        []string
	browserLog string
}

func newWorld(t testing.TB, st localapi.Status, config string) *world {
	t.Helper()
	b := startBus(t)
	w := &world{bus: b, watcher: startWatcher(t, b), dir: shortTemp(t)}
	w.browserLog = filepath.Join(w.dir, "browser.log")
	browser := filepath.Join(w.dir, "browser.sh")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> " + w.browserLog + "\n"
	if err := os.WriteFile(browser, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(w.dir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(w.dir, "config.json")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(w.dir, "vpnd.sock")
	d, err := fakevpnd.Start(sock, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	w.d = d
	w.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + w.dir,
		"XDG_RUNTIME_DIR=" + run,
		"DBUS_SESSION_BUS_ADDRESS=" + b.addr,
		"RUNOS_VPND_SOCKET=" + sock,
		"RUNOS_CONFIG=" + cfg,
		"BROWSER=" + browser,
	}
	return w
}

func (w *world) launches(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(w.browserLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// The stub's shell creates the log before it writes its line: only a
	// line with its newline is a launch (an empty file read in between
	// was once counted as a launch of "": CI).
	lines := strings.SplitAfter(string(b), "\n")
	var out []string
	for _, l := range lines {
		if strings.HasSuffix(l, "\n") {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	return out
}

// browsersDone waits until no browser the app started still runs (each
// writes its launch to the log before it exits).
func (w *world) browsersDone(t testing.TB) {
	t.Helper()
	script := []byte(filepath.Join(w.dir, "browser.sh"))
	running := func() bool {
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, script) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); running(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a browser the app started is still running")
		}
	}
}

func (w *world) calls() []string {
	var out []string
	for _, c := range w.d.Calls() {
		out = append(out, c.String())
	}
	return out
}

func signedIn(cs ...localapi.ClusterStatus) localapi.Status {
	return localapi.Status{Session: localapi.Session{State: localapi.SessionSignedIn, User: "ana@example.com",
		ExpiresAt: time.Now().Add(20 * time.Hour), APIURL: "https://control.test"}, Clusters: cs}
}

func cluster(cid string, wanted bool, state string) localapi.ClusterStatus {
	return localapi.ClusterStatus{CID: cid, Name: "tc-" + cid, Wanted: wanted, State: state}
}

const config = `{"api-url": "https://control.test", "cid": "ky3"}`

func TestMenuFollowsTheDaemonAndClicksReachIt(t *testing.T) {
	w := newWorld(t, signedIn(cluster("ky3", false, localapi.ClusterDisconnected), cluster("xym", false, localapi.ClusterDisconnected)), config)
	p := startApp(t, w.env)
	reg := w.watcher.next(t)
	if reg.Service != "/StatusNotifierItem" {
		t.Fatalf("registered %+v", reg)
	}
	conn := w.bus.conn(t)
	m := readMenu(t, conn, reg)
	items := m.until("the signed-in menu", all(hasPrefix("Signed in as ana@example.com until "), has(menu.TitleConnect), has("ky3"), has("xym")))
	got := labels(items)
	want := []string{got[0], menu.TitleConnect, "----", "ky3", "xym", "----", menu.TitleConsole, menu.TitleQuit}
	if !slices.Equal(got, want) {
		t.Fatalf("menu %q, want %q", got, want)
	}
	for _, cid := range []string{"ky3", "xym"} {
		if n, _ := find(items, cid); n.Toggle != "checkmark" || n.Checked || !n.Enabled {
			t.Fatalf("row %+v", n)
		}
	}
	if n, _ := find(items, got[0]); n.Enabled {
		t.Fatal("the status line is clickable")
	}

	// Click the xym row: the daemon is asked, and the menu follows it.
	xym, _ := find(items, "xym")
	m.click(xym)
	items = m.until("xym checked", checked("xym", true))
	if !slices.Contains(w.calls(), "POST /v1/connect xym") {
		t.Fatalf("daemon calls %q", w.calls())
	}
	if _, ok := find(items, menu.TitleDisconnect); !ok {
		t.Fatalf("toggle did not turn into Disconnect: %q", labels(items))
	}
	iconIs(t, conn, reg, menu.IconConnected)

	// A change made elsewhere (another client, the daemon) shows up live.
	w.d.Update(func(s *localapi.Status) {
		s.Clusters[0].Wanted, s.Clusters[0].State, s.Clusters[0].PeerUp = true, localapi.ClusterConnected, false
	})
	m.until("ky3 without handshake", all(has("ky3 — no handshake"), checked("ky3 — no handshake", true)))
	iconIs(t, conn, reg, menu.IconError)

	// The toggle is `vpn down`: every cluster off and the session ended;
	// the daemon forgets the clusters with it, and the section's
	// placeholder is a plain line, not a checkbox.
	items = visible(m.layout())
	toggle, _ := find(items, menu.TitleDisconnect)
	m.click(toggle)
	items = m.until("signed out", all(has(menu.TitleSignInNeeded), has(menu.TitleConnect), has("Clusters show after sign-in")))
	if got, want := w.calls(), []string{"POST /v1/connect xym", "DELETE /v1/session"}; !slices.Equal(got, want) {
		t.Fatalf("daemon calls %q, want %q", got, want)
	}
	if n, _ := find(items, "Clusters show after sign-in"); n.Toggle != "" || n.Enabled {
		t.Fatalf("placeholder %+v", n)
	}
	if _, ok := find(items, "ky3"); ok {
		t.Fatalf("rows after sign-out: %q", labels(items))
	}
	// The config's api-url still opens the console.
	if n, _ := find(items, menu.TitleConsole); !n.Enabled {
		t.Fatalf("console %+v after sign-out with an api-url configured", n)
	}
	if l := w.launches(t); len(l) != 0 {
		t.Fatalf("browser launched: %q", l)
	}

	// Quit ends the process.
	quit, _ := find(items, menu.TitleQuit)
	m.click(quit)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("Quit did not end runos-desktop")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// The docs: at login "when a fresh sign-in is needed it stays disconnected
// until you sign in from the toggle or the CLI", and it "never opens a
// browser".
func TestAtLoginExpiredSessionOpensNoBrowser(t *testing.T) {
	st := signedIn(cluster("ky3", true, localapi.ClusterDisconnected))
	st.Session.State, st.Session.ExpiresAt = localapi.SessionExpired, time.Now().Add(-time.Hour)
	w := newWorld(t, st, config)
	startApp(t, w.env, "--at-login")
	m := readMenu(t, w.bus.conn(t), w.watcher.next(t))
	m.until("Sign in…", all(has(menu.TitleSignInNeeded), has(menu.TitleSignIn), checked("ky3", false)))

	// The user signs in with the CLI (which connects ky3): the menu follows.
	w.d.Update(func(s *localapi.Status) {
		s.Session.State, s.Session.ExpiresAt = localapi.SessionSignedIn, time.Now().Add(24*time.Hour)
		s.Clusters[0].State, s.Clusters[0].PeerUp = localapi.ClusterConnected, true
	})
	m.until("connected after the CLI's sign-in", all(hasPrefix("Signed in as "), has(menu.TitleDisconnect), checked("ky3", true)))
	if l := w.launches(t); len(l) != 0 {
		t.Fatalf("at login the browser was launched: %q", l)
	}
	if c := w.calls(); len(c) != 0 {
		t.Fatalf("at login the app changed the daemon: %q", c)
	}
	// At login nobody sees stderr: the log goes to the user's cache dir.
	b, err := os.ReadFile(filepath.Join(w.dir, ".cache", "runos", "desktop.log"))
	if err != nil || !strings.Contains(string(b), "started at login") {
		t.Fatalf("login log: %v\n%s", err, b)
	}
}

// The docs' other half: at login with a lapsed sign-in, "Sign in…" is
// what opens the browser, once.
func TestAtLoginExpiredSessionSignInClickOpensTheBrowserOnce(t *testing.T) {
	st := signedIn(cluster("ky3", true, localapi.ClusterDisconnected))
	st.Session.State, st.Session.ExpiresAt = localapi.SessionExpired, time.Now().Add(-time.Hour)
	w := newWorld(t, st, config)
	startApp(t, w.env, "--at-login")
	m := readMenu(t, w.bus.conn(t), w.watcher.next(t))
	items := m.until("Sign in…", all(has(menu.TitleSignInNeeded), has(menu.TitleSignIn)))
	if l := w.launches(t); len(l) != 0 {
		t.Fatalf("the browser launched before the click: %q", l)
	}
	signIn, _ := find(items, menu.TitleSignIn)
	m.click(signIn)
	items = m.until("signing in", all(has("Signing in… finish in your browser"), has("Cancel sign-in")))
	deadline := time.Now().Add(30 * time.Second)
	for len(w.launches(t)) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	l := w.launches(t)
	if len(l) != 1 || !strings.HasPrefix(l[0], "https://control.test/oauth/authorize?") || !strings.Contains(l[0], "client_id=runos-desktop") {
		t.Fatalf("browser launches %q, want one of control's login page", l)
	}
	// Nothing reaches the daemon before the browser answers.
	if c := w.calls(); len(c) != 0 {
		t.Fatalf("daemon calls %q", c)
	}
	// Cancelling ends the attempt: the app is back at "Sign in…" only
	// once its flow (and so every start of the browser for this click) has
	// returned; once no browser it started still runs, a second launch
	// would be in the log.
	cancel, _ := find(items, "Cancel sign-in")
	m.click(cancel)
	m.until("Sign in… again", has(menu.TitleSignIn))
	w.browsersDone(t)
	if l := w.launches(t); len(l) != 1 {
		t.Fatalf("browser launches %q, want 1", l)
	}
}

func TestAtLoginValidSessionReconnects(t *testing.T) {
	w := newWorld(t, signedIn(cluster("ky3", true, localapi.ClusterDisconnected), cluster("xym", false, localapi.ClusterDisconnected)), config)
	startApp(t, w.env, "--at-login")
	m := readMenu(t, w.bus.conn(t), w.watcher.next(t))
	m.until("ky3 reconnected", all(checked("ky3", true), checked("xym", false), has(menu.TitleDisconnect)))
	if got := w.calls(); !slices.Equal(got, []string{"POST /v1/connect ky3"}) {
		t.Fatalf("daemon calls %q", got)
	}
	if l := w.launches(t); len(l) != 0 {
		t.Fatalf("browser launched: %q", l)
	}
}

func TestDaemonNotRunningThenStarted(t *testing.T) {
	w := newWorld(t, signedIn(cluster("ky3", false, localapi.ClusterDisconnected)), config)
	w.d.Close() // the daemon is not running
	startApp(t, w.env)
	m := readMenu(t, w.bus.conn(t), w.watcher.next(t))
	m.until("not running", all(has("The RunOS VPN service is not running"), has("Install or start it: sudo runos vpn install"), has("Try again")))
	up := cluster("ky3", true, localapi.ClusterConnected)
	up.PeerUp = true
	d, err := fakevpnd.Start(w.d.Socket, signedIn(up))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	m.until("the daemon's menu", all(hasPrefix("Signed in as "), checked("ky3", true)))
}

func TestReadOnlyUser(t *testing.T) {
	w := newWorld(t, signedIn(cluster("ky3", false, localapi.ClusterDisconnected)), config)
	w.d.SetReadOnly(true)
	startApp(t, w.env)
	m := readMenu(t, w.bus.conn(t), w.watcher.next(t))
	// The daemon's status says so: read-only before any click.
	items := m.until("read-only", all(has("ky3"), has("You may only view the VPN status")))
	ky3, _ := find(items, "ky3")
	if ky3.Enabled {
		t.Fatal("row enabled for a read-only user")
	}
	if connect, ok := find(items, menu.TitleConnect); !ok || connect.Enabled {
		t.Fatalf("toggle %+v (found %v) for a read-only user", connect, ok)
	}
	if got := w.calls(); len(got) != 0 {
		t.Fatalf("the daemon got %q", got)
	}
}

func TestSecondLaunchAsksTheFirstToShow(t *testing.T) {
	w := newWorld(t, signedIn(), config)
	notes := startNotifications(t, w.bus)
	first := startApp(t, w.env)
	m := readMenu(t, w.bus.conn(t), w.watcher.next(t))
	m.until("signed in", hasPrefix("Signed in as "))
	second := startApp(t, w.env)
	select {
	case <-second.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the second launch kept running")
	}
	want := fmt.Sprintf("RunOS Desktop is already running (pid %d); asked it to show itself", first.cmd.Process.Pid)
	if code := second.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(second.out.String(), want) {
		t.Fatalf("second launch: exit %d, output %q", code, second.out.String())
	}
	// The first shows itself: a notification with how the VPN stands.
	select {
	case n := <-notes.got:
		if n.App != "RunOS Desktop" || n.Summary != "RunOS Desktop is running" || !strings.HasPrefix(n.Body, "Signed in as ana@example.com") {
			t.Fatalf("notification %+v", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first instance did not show itself")
	}
	select {
	case <-first.done:
		t.Fatalf("the first instance exited:\n%s", first.out.String())
	default:
	}
	select {
	case r := <-w.watcher.added:
		t.Fatalf("a second tray item was registered: %+v", r)
	default:
	}
}

// fyne.io/systray drops an icon set while it is still exporting the item;
// the connected icon must reach the tray even when it is the very first
// status the app sees.
func TestIconRightFromTheStart(t *testing.T) {
	up := cluster("ky3", true, localapi.ClusterConnected)
	up.PeerUp = true
	w := newWorld(t, signedIn(up), config)
	startApp(t, w.env)
	reg := w.watcher.next(t)
	iconIs(t, w.bus.conn(t), reg, menu.IconConnected)
}
