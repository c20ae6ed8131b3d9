package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/desktop/internal/fakevpnd"
	"github.com/runos/vpn/desktop/menu"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/localapi/vpnup"
)

// recorder is a Renderer that keeps every menu it is given.
type recorder struct {
	ch chan menu.Menu
}

func (r *recorder) Render(m menu.Menu) {
	select {
	case r.ch <- m:
	default:
		panic("recorder: too many menus")
	}
}

// until waits for a menu that satisfies ok; it fails the test (rather than
// hanging) if none comes.
func (r *recorder) until(t *testing.T, what string, ok func(menu.Menu) bool) menu.Menu {
	t.Helper()
	deadline := time.After(20 * time.Second)
	var last menu.Menu
	for {
		select {
		case m := <-r.ch:
			if ok(m) {
				return m
			}
			last = m
		case <-deadline:
			t.Fatalf("no menu with %s; last: %+v", what, last)
		}
	}
}

func row(m menu.Menu, cid string) menu.Item {
	for _, it := range m.Clusters {
		if it.Title == cid || strings.HasPrefix(it.Title, cid+" ") {
			return it
		}
	}
	return menu.Item{}
}

// notice looks for sub in the notices read top to bottom (long ones wrap).
func notice(m menu.Menu, sub string) bool {
	var all []string
	for _, it := range m.Notices {
		all = append(all, strings.Fields(it.Title)...)
	}
	return strings.Contains(strings.Join(all, " "), sub)
}

// signIns is a SignIn stub that counts launches; block makes it wait for
// its context (a browser the user never finishes).
type signIns struct {
	mu    sync.Mutex
	calls []string
	block bool
}

func (s *signIns) fn(ctx context.Context, apiURL string) (*Token, error) {
	s.mu.Lock()
	s.calls = append(s.calls, apiURL)
	block := s.block
	s.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, fmt.Errorf("waiting for the browser: %w", ctx.Err())
	}
	return &Token{AccessToken: "tok-" + apiURL, ExpiresAt: time.Now().Add(24 * time.Hour)}, nil
}

func (s *signIns) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// controls is a Control stub: the account's clusters as control lists
// them, and every client asked for (control's URL and the token).
type controls struct {
	mu       sync.Mutex
	asked    []string
	clusters []api.Cluster
}

func (c *controls) fn(apiURL, token string) (vpnup.Lister, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, apiURL+" "+token)
	return c, nil
}

func (c *controls) Clusters(context.Context) ([]api.Cluster, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, "GET /v1/clusters")
	return slices.Clone(c.clusters), nil
}

func (c *controls) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.asked)
}

func wireguard(cids ...string) []api.Cluster {
	var out []api.Cluster
	for _, cid := range cids {
		out = append(out, api.Cluster{CID: cid, Name: "tc-" + cid, UserVPN: api.UserVPNWireGuard})
	}
	return out
}

type fixture struct {
	d      *fakevpnd.Daemon
	socket string
	r      *recorder
	in     *signIns
	ctl    *controls
	app    *App
	opened chan string
	done   chan error
	cancel context.CancelFunc
}

func clusters(cs ...localapi.ClusterStatus) []localapi.ClusterStatus { return cs }

func cl(cid string, wanted bool, state string) localapi.ClusterStatus {
	return localapi.ClusterStatus{CID: cid, Name: "tc-" + cid, Wanted: wanted, State: state}
}

func signedIn(cs ...localapi.ClusterStatus) localapi.Status {
	return localapi.Status{Session: localapi.Session{State: localapi.SessionSignedIn, User: "ana@example.com",
		ExpiresAt: time.Now().Add(20 * time.Hour), APIURL: "https://control.example"}, Clusters: cs}
}

func expired(cs ...localapi.ClusterStatus) localapi.Status {
	return localapi.Status{Session: localapi.Session{State: localapi.SessionExpired, User: "ana@example.com",
		ExpiresAt: time.Now().Add(-time.Hour), APIURL: "https://control.example"}, Clusters: cs}
}

// start runs an app against a fake daemon (nil: none running yet).
func start(t *testing.T, st *localapi.Status, tweak func(*Config)) *fixture {
	t.Helper()
	f := &fixture{
		socket: filepath.Join(t.TempDir(), "vpnd.sock"),
		r:      &recorder{ch: make(chan menu.Menu, 1000)},
		in:     &signIns{},
		ctl:    &controls{},
		opened: make(chan string, 10),
		done:   make(chan error, 1),
	}
	if st != nil {
		f.startDaemon(t, *st)
	}
	cfg := Config{
		Daemon:     localapi.NewClient(f.socket),
		SignIn:     f.in.fn,
		Control:    f.ctl.fn,
		Open:       func(u string) error { f.opened <- u; return nil },
		Render:     f.r,
		ConsoleURL: "https://console.example",
		BackoffMin: 5 * time.Millisecond,
		BackoffMax: 50 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	f.app = New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { f.done <- f.app.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-f.done
	})
	return f
}

func (f *fixture) startDaemon(t *testing.T, st localapi.Status) {
	t.Helper()
	d, err := fakevpnd.Start(f.socket, st)
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	t.Cleanup(d.Close)
}

func (f *fixture) calls() []string {
	var out []string
	for _, c := range f.d.Calls() {
		out = append(out, c.String())
	}
	return out
}

func TestFollowsTheDaemon(t *testing.T) {
	st := signedIn(cl("ky3", false, localapi.ClusterDisconnected))
	f := start(t, &st, nil)
	m := f.r.until(t, "signed in", func(m menu.Menu) bool {
		return strings.HasPrefix(m.Status.Title, "Signed in as ana@example.com until ")
	})
	if m.Toggle.Title != menu.TitleConnect || row(m, "ky3").Checked {
		t.Fatalf("menu %+v", m)
	}
	// Something else (the CLI) connects ky3: the menu follows.
	f.d.Update(func(s *localapi.Status) {
		s.Clusters[0].Wanted, s.Clusters[0].State, s.Clusters[0].PeerUp = true, localapi.ClusterConnected, true
	})
	m = f.r.until(t, "ky3 checked", func(m menu.Menu) bool { return row(m, "ky3").Checked })
	if m.Toggle.Title != menu.TitleDisconnect || m.Icon != menu.IconConnected {
		t.Fatalf("menu %+v", m)
	}
	if got := f.calls(); len(got) != 0 {
		t.Fatalf("the app changed something on its own: %v", got)
	}
}

func TestRowAndToggleClicks(t *testing.T) {
	st := signedIn(cl("ky3", false, localapi.ClusterDisconnected), cl("xym", false, localapi.ClusterDisconnected))
	f := start(t, &st, nil)
	m := f.r.until(t, "rows", func(m menu.Menu) bool { return len(m.Clusters) == 2 && m.Clusters[0].Checkable })
	f.app.Click(row(m, "xym").Click)
	f.r.until(t, "xym connected", func(m menu.Menu) bool { return row(m, "xym").Checked && row(m, "xym").Title == "xym" })
	f.d.SetHandshake(10*time.Millisecond, false)
	f.app.Click(menu.Op{Kind: menu.OpConnect, CID: "ky3"})
	m = f.r.until(t, "ky3 without handshake", func(m menu.Menu) bool { return row(m, "ky3").Title == "ky3 — no handshake" })
	if m.Icon != menu.IconError {
		t.Fatalf("icon %v", m.Icon)
	}
	f.app.Click(row(m, "xym").Click)
	f.r.until(t, "xym unchecked", func(m menu.Menu) bool { return !row(m, "xym").Checked && row(m, "xym").Click.Kind == menu.OpConnect })
	f.app.Click(menu.Op{Kind: menu.OpDown})
	m = f.r.until(t, "signed out", func(m menu.Menu) bool {
		return m.Status.Title == menu.TitleSignInNeeded && m.Toggle.Title == menu.TitleConnect
	})
	if m.Toggle.Title != menu.TitleConnect || row(m, "ky3").Checked {
		t.Fatalf("menu %+v", m)
	}
	want := []string{"POST /v1/connect xym", "POST /v1/connect ky3", "POST /v1/disconnect xym", "DELETE /v1/session"}
	if got := f.calls(); !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	if f.in.count() != 0 {
		t.Fatal("signed in although the session was valid")
	}
}

func TestUpSignsInThenConnects(t *testing.T) {
	st := expired(cl("ky3", false, localapi.ClusterDisconnected), cl("xym", false, localapi.ClusterDisconnected))
	f := start(t, &st, func(c *Config) { c.APIURL, c.DefaultCID = "https://control.lab", "xym" })
	m := f.r.until(t, "sign in", func(m menu.Menu) bool { return m.Toggle.Title == menu.TitleSignIn })
	f.app.Click(m.Toggle.Click)
	f.r.until(t, "xym connected", func(m menu.Menu) bool { return row(m, "xym").Checked })
	if f.in.count() != 1 || f.in.calls[0] != "https://control.lab" {
		t.Fatalf("sign-ins %v", f.in.calls)
	}
	calls := f.d.Calls()
	if len(calls) != 2 || calls[0].Path != "/v1/session" || calls[1].String() != "POST /v1/connect xym" {
		t.Fatalf("calls %v", calls)
	}
	if s := calls[0].Session; s.APIURL != "https://control.lab" || s.AccessToken != "tok-https://control.lab" || s.ExpiresAt.IsZero() {
		t.Fatalf("session handed over: %+v", s)
	}
}

func TestRowWhileExpiredSignsInThenConnectsThatCluster(t *testing.T) {
	st := expired(cl("ky3", false, localapi.ClusterDisconnected), cl("xym", false, localapi.ClusterDisconnected))
	f := start(t, &st, nil)
	m := f.r.until(t, "rows", func(m menu.Menu) bool { return len(m.Clusters) == 2 && m.Clusters[0].Checkable })
	f.app.Click(row(m, "ky3").Click)
	f.r.until(t, "ky3 connected", func(m menu.Menu) bool { return row(m, "ky3").Checked })
	if got := f.calls(); !slices.Equal(got, []string{"POST /v1/session", "POST /v1/connect ky3"}) {
		t.Fatalf("calls %q", got)
	}
	if f.in.calls[0] != "https://control.example" {
		t.Fatalf("signed in to %q: the daemon's control URL is the fallback", f.in.calls[0])
	}
	if got := f.ctl.requests(); slices.Contains(got, "GET /v1/clusters") {
		t.Fatalf("asked control for the clusters although the row chose one: %q", got)
	}
}

// Signed out, no cid configured: the daemon lists no cluster (it forgets
// them with the session, and a new session starts with none), so the
// toggle asks control for the account's clusters with the fresh token, as
// `runos vpn up` does, and connects the only one.
func TestUpFreshSignInConnectsTheOnlyCluster(t *testing.T) {
	st := localapi.Status{Session: localapi.Session{State: localapi.SessionSignedOut}, Clusters: clusters()}
	f := start(t, &st, func(c *Config) { c.APIURL = "https://control.lab" })
	f.d.SetAccount(cl("ky3", false, localapi.ClusterDisconnected))
	f.ctl.clusters = append(wireguard("ky3"), api.Cluster{CID: "nb1", UserVPN: api.UserVPNNetBird})
	m := f.r.until(t, "connect", func(m menu.Menu) bool {
		return m.Toggle.Title == menu.TitleConnect && m.Toggle.Enabled && m.Clusters[0].Title == "Clusters show after sign-in"
	})
	f.app.Click(m.Toggle.Click)
	m = f.r.until(t, "ky3 connected", func(m menu.Menu) bool { return row(m, "ky3").Checked && m.Toggle.Title == menu.TitleDisconnect })
	if notice(m, "Failed") {
		t.Fatalf("notices %+v", m.Notices)
	}
	if got := f.calls(); !slices.Equal(got, []string{"POST /v1/session", "POST /v1/connect ky3"}) {
		t.Fatalf("calls %q", got)
	}
	if got, want := f.ctl.requests(), []string{"https://control.lab tok-https://control.lab", "GET /v1/clusters"}; !slices.Equal(got, want) {
		t.Fatalf("control %q, want %q", got, want)
	}
}

// A fresh sign-in with several clusters on the account: up says how to
// choose, and the rows (listed a moment later) are there to click.
func TestUpFreshSignInSeveralClustersSaysHowToChoose(t *testing.T) {
	st := localapi.Status{Session: localapi.Session{State: localapi.SessionSignedOut}, Clusters: clusters()}
	f := start(t, &st, func(c *Config) { c.APIURL = "https://control.lab" })
	f.d.SetAccount(cl("ky3", false, localapi.ClusterDisconnected), cl("xym", false, localapi.ClusterDisconnected))
	f.ctl.clusters = wireguard("xym", "ky3")
	m := f.r.until(t, "connect", func(m menu.Menu) bool { return m.Toggle.Title == menu.TitleConnect && m.Toggle.Enabled })
	f.app.Click(m.Toggle.Click)
	m = f.r.until(t, "the choice", func(m menu.Menu) bool {
		return notice(m, "Failed: connect: choose a cluster: your account has 2 clusters (ky3, xym); click a cluster's row, or set a default with: runos config set cid <cid>") &&
			row(m, "xym").Click.Kind == menu.OpConnect
	})
	f.app.Click(row(m, "xym").Click)
	f.r.until(t, "xym connected", func(m menu.Menu) bool { return row(m, "xym").Checked })
	if got := f.calls(); !slices.Equal(got, []string{"POST /v1/session", "POST /v1/connect xym"}) {
		t.Fatalf("calls %q", got)
	}
}

// The sign-in lapsed with several clusters connected and no cid
// configured: "Sign in…" signs in and the daemon reconnects them all by
// itself, as after `runos vpn up`; nothing to choose.
func TestSignInAgainRestoresSeveralClusters(t *testing.T) {
	st := expired(cl("ky3", true, localapi.ClusterDisconnected), cl("xym", true, localapi.ClusterDisconnected), cl("abc", false, localapi.ClusterDisconnected))
	f := start(t, &st, nil)
	m := f.r.until(t, "sign in", func(m menu.Menu) bool { return m.Toggle.Title == menu.TitleSignIn })
	f.app.Click(m.Toggle.Click)
	m = f.r.until(t, "both back", func(m menu.Menu) bool {
		return row(m, "ky3").Checked && row(m, "xym").Checked && row(m, "abc").Title == "abc" && len(m.Notices) == 0
	})
	if notice(m, "Failed") || m.Toggle.Title != menu.TitleDisconnect || m.Icon != menu.IconConnected {
		t.Fatalf("menu %+v", m)
	}
	if got := f.calls(); !slices.Equal(got, []string{"POST /v1/session"}) {
		t.Fatalf("calls %q: the daemon restores the clusters itself", got)
	}
	if got := f.ctl.requests(); slices.Contains(got, "GET /v1/clusters") {
		t.Fatalf("asked control for the clusters although the daemon restored them: %q", got)
	}
	if f.in.count() != 1 {
		t.Fatalf("%d sign-ins", f.in.count())
	}
}

// The daemon is signed in to another control than the configured one:
// Connect signs in to the configured one first, as `runos vpn up` does.
func TestUpSignsInAgainToTheConfiguredControl(t *testing.T) {
	st := signedIn(cl("ky3", false, localapi.ClusterDisconnected))
	f := start(t, &st, func(c *Config) { c.APIURL, c.DefaultCID = "https://control.lab", "ky3" })
	m := f.r.until(t, "connect", func(m menu.Menu) bool { return m.Toggle.Title == menu.TitleConnect && m.Toggle.Enabled })
	f.app.Click(m.Toggle.Click)
	f.r.until(t, "ky3 connected", func(m menu.Menu) bool { return row(m, "ky3").Checked })
	if !slices.Equal(f.in.calls, []string{"https://control.lab"}) {
		t.Fatalf("sign-ins %q", f.in.calls)
	}
	if got := f.calls(); !slices.Equal(got, []string{"POST /v1/session", "POST /v1/connect ky3"}) {
		t.Fatalf("calls %q", got)
	}
}

func TestAtLoginSessionExpiredOpensNothing(t *testing.T) {
	st := expired(cl("ky3", true, localapi.ClusterDisconnected))
	f := start(t, &st, func(c *Config) { c.AtLogin = true })
	m := f.r.until(t, "sign in", func(m menu.Menu) bool { return m.Toggle.Title == menu.TitleSignIn })
	if row(m, "ky3").Checked || m.Icon != menu.IconSignIn {
		t.Fatalf("menu %+v", m)
	}
	// The user signs in with the CLI, which connects: the menu follows.
	f.d.Update(func(s *localapi.Status) {
		s.Session.State, s.Session.ExpiresAt = localapi.SessionSignedIn, time.Now().Add(24*time.Hour)
		s.Clusters[0].State, s.Clusters[0].PeerUp = localapi.ClusterConnected, true
	})
	f.r.until(t, "ky3 checked", func(m menu.Menu) bool { return row(m, "ky3").Checked && m.Toggle.Title == menu.TitleDisconnect })
	if f.in.count() != 0 {
		t.Fatalf("at login the app opened the browser %d times", f.in.count())
	}
	if got := f.calls(); len(got) != 0 {
		t.Fatalf("at login the app changed something: %v", got)
	}
}

func TestAtLoginSessionValidReconnects(t *testing.T) {
	st := signedIn(cl("ky3", true, localapi.ClusterDisconnected), cl("xym", false, localapi.ClusterDisconnected))
	f := start(t, &st, func(c *Config) { c.AtLogin = true })
	f.r.until(t, "ky3 reconnected", func(m menu.Menu) bool { return row(m, "ky3").Checked })
	if got := f.calls(); !slices.Equal(got, []string{"POST /v1/connect ky3"}) {
		t.Fatalf("calls %q", got)
	}
	if f.in.count() != 0 {
		t.Fatal("opened the browser at login")
	}
}

func TestDaemonNotRunningThenStartsAndRestarts(t *testing.T) {
	f := start(t, nil, nil)
	m := f.r.until(t, "not running", func(m menu.Menu) bool { return m.Status.Title == "The RunOS VPN service is not running" })
	if !notice(m, "sudo runos vpn install") {
		t.Fatalf("notices %+v", m.Notices)
	}
	f.startDaemon(t, signedIn(cl("ky3", false, localapi.ClusterDisconnected)))
	f.r.until(t, "signed in", func(m menu.Menu) bool { return strings.HasPrefix(m.Status.Title, "Signed in") })
	// The daemon restarts.
	f.d.Close()
	f.r.until(t, "daemon gone", func(m menu.Menu) bool { return !strings.HasPrefix(m.Status.Title, "Signed in") })
	f.startDaemon(t, signedIn(cl("ky3", true, localapi.ClusterConnected)))
	f.r.until(t, "back", func(m menu.Menu) bool { return row(m, "ky3").Checked })
}

func TestRetryReachesTheDaemonAtOnce(t *testing.T) {
	f := start(t, nil, func(c *Config) { c.BackoffMin, c.BackoffMax = time.Hour, time.Hour })
	m := f.r.until(t, "not running", func(m menu.Menu) bool { return m.Status.Title == "The RunOS VPN service is not running" })
	f.startDaemon(t, signedIn())
	f.app.Click(m.Notices[len(m.Notices)-1].Click) // "Try again", not the hour's backoff
	f.r.until(t, "signed in", func(m menu.Menu) bool { return strings.HasPrefix(m.Status.Title, "Signed in") })
}

func TestReadOnlyUser(t *testing.T) {
	// The daemon's status says this user may only read: the menu says so
	// and offers no change before any click.
	st := signedIn(cl("ky3", false, localapi.ClusterDisconnected))
	f := start(t, &st, nil)
	f.d.SetReadOnly(true)
	m := f.r.until(t, "read-only", func(m menu.Menu) bool { return notice(m, "You may only view the VPN status") })
	if !notice(m, "To change it, ask an administrator to run: sudo runos vpn install --operator") || m.Toggle.Enabled || row(m, "ky3").Enabled {
		t.Fatalf("menu %+v", m)
	}
	f.app.Click(row(m, "ky3").Click)
	f.app.Click(m.Toggle.Click)
	// Access granted: the menu follows the next status.
	f.d.SetReadOnly(false)
	m = f.r.until(t, "may change", func(m menu.Menu) bool { return row(m, "ky3").Enabled })
	if notice(m, "You may only view") || !m.Toggle.Enabled {
		t.Fatalf("menu %+v", m)
	}
	if got := f.calls(); len(got) != 0 {
		t.Fatalf("clicks on disabled items reached the daemon: %q", got)
	}
}

func TestReadOnlyUserOlderDaemon(t *testing.T) {
	// A daemon older than Status.Access: the first refusal tells.
	st := signedIn(cl("ky3", false, localapi.ClusterDisconnected))
	f := start(t, &st, nil)
	f.d.SetNoAccess(true)
	f.d.SetReadOnly(true)
	m := f.r.until(t, "rows", func(m menu.Menu) bool { return row(m, "ky3").Checkable })
	if notice(m, "You may only view") {
		t.Fatalf("read-only before any refusal from a daemon that does not say: %+v", m.Notices)
	}
	f.app.Click(row(m, "ky3").Click)
	m = f.r.until(t, "read-only", func(m menu.Menu) bool { return notice(m, "You may only view the VPN status") })
	if !notice(m, "To change it, ask an administrator to run: sudo runos vpn install --operator") || m.Toggle.Enabled || row(m, "ky3").Enabled {
		t.Fatalf("menu %+v", m)
	}
}

func TestCancelSignIn(t *testing.T) {
	st := expired()
	f := start(t, &st, nil)
	f.in.block = true
	m := f.r.until(t, "sign in", func(m menu.Menu) bool { return m.Toggle.Title == menu.TitleSignIn })
	f.app.Click(m.Toggle.Click)
	m = f.r.until(t, "signing in", func(m menu.Menu) bool { return m.Toggle.Click.Kind == menu.OpCancelSignIn })
	f.app.Click(m.Toggle.Click)
	m = f.r.until(t, "sign in again", func(m menu.Menu) bool { return m.Toggle.Title == menu.TitleSignIn })
	if notice(m, "Failed") {
		t.Fatalf("cancelling is not a failure: %+v", m.Notices)
	}
	if got := f.calls(); len(got) != 0 {
		t.Fatalf("calls %q", got)
	}
}

func TestSignedInWithTheCLIWhileTheBrowserWaits(t *testing.T) {
	st := expired(cl("ky3", false, localapi.ClusterDisconnected))
	f := start(t, &st, nil)
	f.in.block = true
	m := f.r.until(t, "sign in", func(m menu.Menu) bool { return m.Toggle.Title == menu.TitleSignIn })
	f.app.Click(m.Toggle.Click)
	f.r.until(t, "signing in", func(m menu.Menu) bool { return m.Toggle.Click.Kind == menu.OpCancelSignIn })
	f.d.Update(func(s *localapi.Status) {
		s.Session.State = localapi.SessionSignedIn
		s.Clusters[0].Wanted, s.Clusters[0].State, s.Clusters[0].PeerUp = true, localapi.ClusterConnected, true
	})
	m = f.r.until(t, "following the CLI", func(m menu.Menu) bool { return m.Toggle.Title == menu.TitleDisconnect })
	if !row(m, "ky3").Checked || notice(m, "Failed") {
		t.Fatalf("menu %+v", m)
	}
	if got := f.calls(); len(got) != 0 {
		t.Fatalf("calls %q: the abandoned browser sign-in reached the daemon", got)
	}
}

func TestOpenConsoleAndQuit(t *testing.T) {
	st := signedIn()
	f := start(t, &st, nil)
	f.r.until(t, "signed in", func(m menu.Menu) bool { return strings.HasPrefix(m.Status.Title, "Signed in") })
	f.app.Click(menu.Op{Kind: menu.OpOpenConsole})
	if u := <-f.opened; u != "https://console.example" {
		t.Fatalf("opened %q", u)
	}
	f.app.Click(menu.Op{Kind: menu.OpQuit})
	if err := <-f.done; err != nil {
		t.Fatalf("Run after Quit: %v", err)
	}
	f.done <- nil // for the cleanup
	select {
	case <-f.app.Quit():
	default:
		t.Fatal("Quit channel not closed")
	}
	f.app.Click(menu.Op{Kind: menu.OpQuit}) // after Run: returns, never blocks
}

// After a sign-out the daemon knows no control URL, and it may not be
// running: the configured api-url opens the console.
func TestOpenConsoleFromTheConfig(t *testing.T) {
	f := start(t, nil, func(c *Config) { c.ConsoleURL, c.APIURL = "", "https://control.lab" })
	m := f.r.until(t, "not running", func(m menu.Menu) bool { return m.Status.Title == "The RunOS VPN service is not running" })
	if !m.Console.Enabled {
		t.Fatalf("console %+v", m.Console)
	}
	f.app.Click(m.Console.Click)
	if u := <-f.opened; u != "https://control.lab" {
		t.Fatalf("opened %q", u)
	}
}

func TestConfigErrorShown(t *testing.T) {
	st := signedIn()
	f := start(t, &st, func(c *Config) {
		c.ConfigErr = errors.New("config file /home/ana/.config/runos/config.json: key \"cid\": want a string (fix or remove it)")
	})
	f.r.until(t, "config error", func(m menu.Menu) bool { return notice(m, "Config: config file") })
}
