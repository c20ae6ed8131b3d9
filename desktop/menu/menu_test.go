package menu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

var (
	loc     = time.FixedZone("CET", 3600)
	now     = time.Date(2026, 3, 10, 9, 30, 0, 0, loc)
	expires = time.Date(2026, 3, 10, 14, 5, 0, 0, loc)
)

func cluster(cid, state string, wanted, peerUp bool) localapi.ClusterStatus {
	return localapi.ClusterStatus{CID: cid, Name: "tc3-" + cid, State: state, Wanted: wanted, PeerUp: peerUp,
		Server: localapi.Server{NodeID: "n1", Endpoint: "198.51.100.21:32768"}}
}

func status(seq uint64, session string, cs ...localapi.ClusterStatus) *localapi.Status {
	st := &localapi.Status{Seq: seq, Session: localapi.Session{State: session}, Clusters: cs}
	if session != localapi.SessionSignedOut {
		st.Session.User = "ana@example.com"
		st.Session.ExpiresAt = expires
	}
	return st
}

// run applies events in order and returns the final state and every op
// they asked for.
func run(t *testing.T, s State, evs ...Event) (State, []Op) {
	t.Helper()
	var all []Op
	for _, ev := range evs {
		var ops []Op
		s, ops = Apply(s, ev)
		all = append(all, ops...)
	}
	return s, all
}

func titles(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Title)
	}
	return out
}

// hasNotice looks for sub in the notices as read top to bottom (long ones
// wrap over several rows).
func hasNotice(m Menu, sub string) bool {
	return strings.Contains(strings.Join(strings.Fields(strings.Join(titles(m.Notices), " ")), " "), sub)
}

// placeholder reports whether the cluster section is the one quiet line.
func placeholder(m Menu, text string) bool {
	return len(m.Clusters) == 1 && m.Clusters[0] == Item{Title: text}
}

func TestNoClusters(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(1, localapi.SessionSignedIn)})
	if m := Build(s, now); !placeholder(m, "No cluster to connect to") {
		t.Fatalf("clusters %+v", m.Clusters)
	}
	s, _ = Apply(s, StatusEvent{status(2, localapi.SessionSignedOut)})
	if m := Build(s, now); !placeholder(m, "Clusters show after sign-in") {
		t.Fatalf("clusters %+v", m.Clusters)
	}
}

func TestStarting(t *testing.T) {
	m := Build(State{}, now)
	if m.Status.Title != "Reaching the RunOS VPN service…" || m.Toggle.Enabled || !placeholder(m, "Clusters show once the service answers") {
		t.Fatalf("starting menu: %+v", m)
	}
	if m.Quit.Title != TitleQuit || !m.Quit.Enabled || m.Quit.Click.Kind != OpQuit {
		t.Fatalf("quit: %+v", m.Quit)
	}
}

func TestDaemonNotRunning(t *testing.T) {
	err := fmt.Errorf("%w (socket /run/runos/vpnd.sock: connect: no such file); start it with: sudo runos vpn install", localapi.ErrNoDaemon)
	s, ops := run(t, State{}, LostEvent{Err: err})
	if len(ops) != 0 {
		t.Fatalf("ops %v", ops)
	}
	m := Build(s, now)
	if m.Status.Title != "The RunOS VPN service is not running" {
		t.Fatalf("status %q", m.Status.Title)
	}
	if !hasNotice(m, "Install or start it: sudo runos vpn install") {
		t.Fatalf("no install command in %q", titles(m.Notices))
	}
	retry := m.Notices[len(m.Notices)-1]
	if retry.Click.Kind != OpRetry || !retry.Enabled {
		t.Fatalf("no retry: %+v", retry)
	}
	if m.Toggle.Enabled || m.Icon != IconError || !placeholder(m, "Clusters show once the service answers") {
		t.Fatalf("menu %+v", m)
	}
	// A click that raced the daemon going away does nothing.
	if _, ops := Apply(s, ClickEvent{Op: Op{Kind: OpUp}}); len(ops) != 0 {
		t.Fatalf("up without a daemon: %v", ops)
	}
	if _, ops := Apply(s, ClickEvent{Op: Op{Kind: OpRetry}}); !slices.Equal(ops, []Op{{Kind: OpRetry}}) {
		t.Fatalf("retry: %v", ops)
	}
}

func TestStreamLostThenBack(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(1, localapi.SessionSignedIn)}, LostEvent{Err: errors.New("unexpected EOF")})
	m := Build(s, now)
	if m.Status.Title != "Lost the RunOS VPN service, reconnecting…" || m.Toggle.Enabled {
		t.Fatalf("lost: %+v", m)
	}
	s, _ = Apply(s, StatusEvent{status(1, localapi.SessionSignedIn)}) // a restarted daemon starts its seq again
	if Build(s, now).Status.Title != "Signed in as ana@example.com until 14:05" {
		t.Fatalf("after reconnect: %q", Build(s, now).Status.Title)
	}
}

func TestSignedInDisconnected(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(3, localapi.SessionSignedIn,
		cluster("ky3", localapi.ClusterDisconnected, false, false),
		cluster("xym", localapi.ClusterDisconnected, false, false))})
	m := Build(s, now)
	if m.Status.Title != "Signed in as ana@example.com until 14:05" {
		t.Fatalf("status %q", m.Status.Title)
	}
	if m.Toggle.Title != TitleConnect || !m.Toggle.Enabled || m.Toggle.Click != (Op{Kind: OpUp}) {
		t.Fatalf("toggle %+v", m.Toggle)
	}
	if got := titles(m.Clusters); !slices.Equal(got, []string{"ky3", "xym"}) {
		t.Fatalf("rows %q", got)
	}
	for _, r := range m.Clusters {
		if !r.Checkable || r.Checked || !r.Enabled || r.Click.Kind != OpConnect {
			t.Fatalf("row %+v", r)
		}
	}
	if m.Icon != IconDisconnected || len(m.Notices) != 0 {
		t.Fatalf("icon %v notices %q", m.Icon, titles(m.Notices))
	}
	if !strings.HasPrefix(m.Clusters[0].Tooltip, "tc3-ky3: ") {
		t.Fatalf("tooltip %q", m.Clusters[0].Tooltip)
	}
}

func TestConnected(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(3, localapi.SessionSignedIn,
		cluster("ky3", localapi.ClusterConnected, true, true),
		cluster("xym", localapi.ClusterDisconnected, false, false))})
	m := Build(s, now)
	if m.Toggle.Title != TitleDisconnect || m.Toggle.Click != (Op{Kind: OpDown}) {
		t.Fatalf("toggle %+v", m.Toggle)
	}
	ky3, xym := m.Clusters[0], m.Clusters[1]
	if ky3.Title != "ky3" || !ky3.Checked || ky3.Click != (Op{Kind: OpDisconnect, CID: "ky3"}) {
		t.Fatalf("ky3 %+v", ky3)
	}
	if xym.Checked || xym.Click != (Op{Kind: OpConnect, CID: "xym"}) {
		t.Fatalf("xym %+v", xym)
	}
	if m.Icon != IconConnected || m.Tooltip != "RunOS VPN: connected to ky3" {
		t.Fatalf("icon %v %q", m.Icon, m.Tooltip)
	}
}

func TestNoHandshake(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(3, localapi.SessionSignedIn,
		cluster("ky3", localapi.ClusterConnected, true, false))})
	m := Build(s, now)
	if m.Clusters[0].Title != "ky3 — no handshake" || !m.Clusters[0].Checked {
		t.Fatalf("row %+v", m.Clusters[0])
	}
	if !strings.Contains(m.Clusters[0].Tooltip, "No WireGuard handshake with n1") {
		t.Fatalf("tooltip %q", m.Clusters[0].Tooltip)
	}
	if m.Icon != IconError || m.Tooltip != "RunOS VPN: trouble with ky3" {
		t.Fatalf("icon %v %q", m.Icon, m.Tooltip)
	}
}

// TestSilentServer: a connected cluster whose server stopped answering
// shows what the daemon observed on its row, and the tray says trouble.
func TestSilentServer(t *testing.T) {
	c := cluster("ky3", localapi.ClusterConnected, true, false)
	c.Error = "no answer from n1 at 10.77.0.21:32768 for 17 s"
	s, _ := run(t, State{}, StatusEvent{status(3, localapi.SessionSignedIn, c)})
	m := Build(s, now)
	if m.Clusters[0].Title != "ky3 — no answer from n1 at 10.77.0.21:32768 for 17 s" || !m.Clusters[0].Checked {
		t.Fatalf("row %+v", m.Clusters[0])
	}
	if !strings.Contains(m.Clusters[0].Tooltip, "No answer from n1 at 10.77.0.21:32768 for 17 s") {
		t.Fatalf("tooltip %q", m.Clusters[0].Tooltip)
	}
	if m.Icon != IconError || m.Tooltip != "RunOS VPN: trouble with ky3" {
		t.Fatalf("icon %v %q", m.Icon, m.Tooltip)
	}
}

func TestClusterConnectingAndError(t *testing.T) {
	bad := cluster("xym", localapi.ClusterError, true, false)
	bad.Error = "connect xym: gateway n1 unreachable: no route to host"
	s, _ := run(t, State{}, StatusEvent{status(3, localapi.SessionSignedIn,
		cluster("ky3", localapi.ClusterConnecting, true, false), bad)})
	m := Build(s, now)
	if got := titles(m.Clusters); !slices.Equal(got, []string{"ky3 — connecting…", "xym — connect xym: gateway n1 unreachable: no route to host"}) {
		t.Fatalf("rows %q", got)
	}
	if m.Clusters[0].Checked || m.Clusters[0].Click.Kind != OpDisconnect || m.Clusters[1].Click.Kind != OpDisconnect {
		t.Fatalf("rows %+v", m.Clusters)
	}
	if m.Icon != IconError {
		t.Fatalf("icon %v", m.Icon)
	}
	// Only connecting: the connecting icon.
	s, _ = Apply(s, StatusEvent{status(4, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterConnecting, true, false))})
	if m := Build(s, now); m.Icon != IconConnecting || m.Tooltip != "RunOS VPN: connecting to ky3" {
		t.Fatalf("icon %v %q", m.Icon, m.Tooltip)
	}
}

func TestLongErrorIsClipped(t *testing.T) {
	bad := cluster("xym", localapi.ClusterError, true, false)
	bad.Error = strings.Repeat("very long reason ", 20)
	s, _ := run(t, State{}, StatusEvent{status(3, localapi.SessionSignedIn, bad)})
	row := Build(s, now).Clusters[0]
	if n := len([]rune(row.Title)); n != maxTitle || !strings.HasSuffix(row.Title, "…") {
		t.Fatalf("title %d runes: %q", n, row.Title)
	}
	if !strings.Contains(row.Tooltip, strings.TrimSpace(bad.Error)) {
		t.Fatalf("tooltip lost the error: %q", row.Tooltip)
	}
}

func TestSessionExpired(t *testing.T) {
	s, ops := run(t, State{}, StatusEvent{status(3, localapi.SessionExpired,
		cluster("ky3", localapi.ClusterDisconnected, true, false))})
	if len(ops) != 0 {
		t.Fatalf("ops %v", ops)
	}
	m := Build(s, now)
	if m.Status.Title != TitleSignInNeeded || m.Toggle.Title != TitleSignIn || m.Toggle.Click != (Op{Kind: OpUp}) || !m.Toggle.Enabled {
		t.Fatalf("menu %+v", m)
	}
	if !hasNotice(m, "Your sign-in ended at 14:05 (a sign-in lasts 24 hours)") {
		t.Fatalf("notices %q", titles(m.Notices))
	}
	if m.Icon != IconSignIn {
		t.Fatalf("icon %v", m.Icon)
	}
	// A row signs in and then connects that cluster (`runos vpn up --cid ky3`).
	if row := m.Clusters[0]; row.Click != (Op{Kind: OpUp, CID: "ky3"}) || row.Checked || !row.Enabled {
		t.Fatalf("row %+v", row)
	}
}

func TestSignedOut(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(1, localapi.SessionSignedOut)})
	m := Build(s, now)
	if m.Status.Title != TitleSignInNeeded || m.Toggle.Title != TitleConnect || m.Toggle.Click != (Op{Kind: OpUp}) {
		t.Fatalf("menu %+v", m)
	}
	if m.Icon != IconDisconnected {
		t.Fatalf("icon %v", m.Icon)
	}
}

func TestSignInInProgress(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(1, localapi.SessionExpired, cluster("ky3", localapi.ClusterDisconnected, true, false))})
	s, ops := Apply(s, ClickEvent{Op: Op{Kind: OpUp}})
	if !slices.Equal(ops, []Op{{Kind: OpUp}}) {
		t.Fatalf("ops %v", ops)
	}
	if m := Build(s, now); m.Toggle.Title != "Connecting…" || m.Toggle.Enabled {
		t.Fatalf("toggle %+v", m.Toggle)
	}
	// A second click while the first runs does nothing: one sign-in at a time.
	if _, ops := Apply(s, ClickEvent{Op: Op{Kind: OpUp}}); len(ops) != 0 {
		t.Fatalf("second up: %v", ops)
	}
	if _, ops := Apply(s, ClickEvent{Op: Op{Kind: OpUp, CID: "ky3"}}); len(ops) != 0 {
		t.Fatalf("row up during up: %v", ops)
	}
	s, _ = Apply(s, SignInEvent{Active: true})
	m := Build(s, now)
	if m.Status.Title != "Signing in… finish in your browser" || m.Icon != IconSignIn {
		t.Fatalf("menu %+v", m)
	}
	if m.Toggle.Title != "Cancel sign-in" || m.Toggle.Click.Kind != OpCancelSignIn || !m.Toggle.Enabled {
		t.Fatalf("toggle %+v", m.Toggle)
	}
	if m.Clusters[0].Enabled {
		t.Fatalf("row enabled during sign-in: %+v", m.Clusters[0])
	}
	if hasNotice(m, "Your sign-in ended") {
		t.Fatalf("expiry notice while signing in: %q", titles(m.Notices))
	}
	_, ops = Apply(s, ClickEvent{Op: Op{Kind: OpCancelSignIn}})
	if !slices.Equal(ops, []Op{{Kind: OpCancelSignIn}}) {
		t.Fatalf("cancel: %v", ops)
	}
	// The user cancels: no error shown, back to "Sign in…".
	s, _ = run(t, s, SignInEvent{}, DoneEvent{Op: Op{Kind: OpUp}, Err: fmt.Errorf("sign in: %w", context.Canceled)})
	if m := Build(s, now); m.Toggle.Title != TitleSignIn || len(s.Busy) != 0 || s.Err != "" {
		t.Fatalf("after cancel: %+v busy %v err %q", m.Toggle, s.Busy, s.Err)
	}
}

func TestSignedInWithTheCLIWhileBrowserWaits(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(1, localapi.SessionExpired)}, ClickEvent{Op: Op{Kind: OpUp}}, SignInEvent{Active: true})
	s, ops := Apply(s, StatusEvent{status(2, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterConnecting, true, false))})
	if !slices.Equal(ops, []Op{{Kind: OpCancelSignIn}}) {
		t.Fatalf("ops %v", ops)
	}
	s, _ = run(t, s, SignInEvent{}, DoneEvent{Op: Op{Kind: OpUp}, Err: context.Canceled})
	m := Build(s, now)
	if m.Toggle.Title != TitleDisconnect || m.Clusters[0].Title != "ky3 — connecting…" || s.Err != "" {
		t.Fatalf("menu %+v", m)
	}
}

func TestToggleAndRowClicks(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(1, localapi.SessionSignedIn,
		cluster("ky3", localapi.ClusterConnected, true, true),
		cluster("xym", localapi.ClusterDisconnected, false, false))})
	m := Build(s, now)
	s2, ops := Apply(s, ClickEvent{Op: m.Clusters[1].Click})
	if !slices.Equal(ops, []Op{{Kind: OpConnect, CID: "xym"}}) {
		t.Fatalf("ops %v", ops)
	}
	m2 := Build(s2, now)
	if m2.Clusters[1].Title != "xym — connecting…" || m2.Clusters[1].Enabled || m2.Icon != IconConnecting {
		t.Fatalf("busy row %+v icon %v", m2.Clusters[1], m2.Icon)
	}
	if _, ops := Apply(s2, ClickEvent{Op: Op{Kind: OpConnect, CID: "xym"}}); len(ops) != 0 {
		t.Fatalf("double click: %v", ops)
	}
	// Another row still works while xym connects.
	if _, ops := Apply(s2, ClickEvent{Op: m.Clusters[0].Click}); !slices.Equal(ops, []Op{{Kind: OpDisconnect, CID: "ky3"}}) {
		t.Fatalf("ky3: %v", ops)
	}
	s3, ops := Apply(s2, ClickEvent{Op: m.Toggle.Click})
	if !slices.Equal(ops, []Op{{Kind: OpDown}}) {
		t.Fatalf("down: %v", ops)
	}
	m3 := Build(s3, now)
	if m3.Toggle.Title != "Disconnecting…" || m3.Toggle.Enabled {
		t.Fatalf("toggle %+v", m3.Toggle)
	}
	// While the session ends nothing else starts.
	if _, ops := Apply(s3, ClickEvent{Op: Op{Kind: OpConnect, CID: "ky3"}}); len(ops) != 0 {
		t.Fatalf("connect during down: %v", ops)
	}
	s4, _ := run(t, s3, DoneEvent{Op: Op{Kind: OpDown}, Status: status(2, localapi.SessionSignedOut,
		cluster("ky3", localapi.ClusterDisconnected, false, false), cluster("xym", localapi.ClusterDisconnected, false, false))})
	if m := Build(s4, now); m.Toggle.Title != TitleConnect || m.Status.Title != TitleSignInNeeded || m.Clusters[0].Checked {
		t.Fatalf("after down %+v", m)
	}
	if slices.Contains(s4.Busy, Op{Kind: OpDown}) {
		t.Fatalf("busy %v", s4.Busy)
	}
}

func TestStaleAnswerIgnored(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(5, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterConnected, true, true))})
	s, _ = Apply(s, DoneEvent{Op: Op{Kind: OpConnect, CID: "ky3"}, Status: status(4, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterConnecting, true, false))})
	if s.Status.Seq != 5 {
		t.Fatalf("stale answer replaced status: seq %d", s.Status.Seq)
	}
}

func TestReadOnlyUser(t *testing.T) {
	s, _ := run(t, State{OSUser: "bob"}, StatusEvent{status(1, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterDisconnected, false, false))},
		ClickEvent{Op: Op{Kind: OpConnect, CID: "ky3"}})
	forbidden := &api.Error{Status: 403, Code: localapi.CodeForbidden, Message: "user bob may only read the VPN status",
		Hint: "Ask an admin to run: sudo runos vpn install --operator bob"}
	s, _ = Apply(s, DoneEvent{Op: Op{Kind: OpConnect, CID: "ky3"}, Err: fmt.Errorf("connect ky3: %w", forbidden)})
	m := Build(s, now)
	if !hasNotice(m, "You may only view the VPN status") || !hasNotice(m, "To change it, ask an admin to run: sudo runos vpn install --operator bob") {
		t.Fatalf("notices %q", titles(m.Notices))
	}
	if m.Toggle.Enabled || m.Clusters[0].Enabled || hasNotice(m, "Failed") {
		t.Fatalf("menu %+v", m)
	}
	if _, ops := Apply(s, ClickEvent{Op: Op{Kind: OpUp}}); len(ops) != 0 {
		t.Fatalf("up while read-only: %v", ops)
	}
	// Without a hint from the daemon, the menu names the command itself.
	s.ReadHint = ""
	if m := Build(s, now); !hasNotice(m, "To change it, ask an administrator to run: sudo runos vpn install --operator bob") {
		t.Fatalf("notices %q", titles(m.Notices))
	}
	// A daemon restart may come back with other operators: try again.
	s, _ = run(t, s, LostEvent{Err: errors.New("EOF")}, StatusEvent{status(1, localapi.SessionSignedIn)})
	if s.ReadOnly || !Build(s, now).Toggle.Enabled {
		t.Fatalf("still read-only after restart")
	}
}

// withAccess is st as the daemon answers a caller who may (control) or may
// not change the VPN.
func withAccess(st *localapi.Status, control bool) *localapi.Status {
	st.Access = &localapi.Access{Control: true, Reason: "root and may change the VPN state"}
	if !control {
		st.Access = &localapi.Access{
			Reason: "bob (uid 1001) may only read the VPN status: changing it is for root, the operator recorded at install and members of the runos group",
			Hint:   "ask an administrator to run: sudo runos vpn install --operator bob"}
	}
	return st
}

func TestReadOnlyFromStatus(t *testing.T) {
	// The daemon's status says so: read-only before any click.
	s, _ := run(t, State{OSUser: "bob"}, StatusEvent{withAccess(status(1, localapi.SessionSignedIn,
		cluster("ky3", localapi.ClusterConnected, true, true), cluster("xym", localapi.ClusterDisconnected, false, false)), false)})
	m := Build(s, now)
	if !hasNotice(m, "You may only view the VPN status") ||
		!hasNotice(m, "To change it, ask an administrator to run: sudo runos vpn install --operator bob") {
		t.Fatalf("notices %q", titles(m.Notices))
	}
	if tip := m.Notices[0].Tooltip; !strings.Contains(tip, "bob (uid 1001) may only read the VPN status") {
		t.Errorf("the read-only line's tooltip %q does not say why", tip)
	}
	// Nothing that changes state is clickable; the rows still show the state.
	if m.Toggle.Enabled || m.Clusters[0].Enabled || m.Clusters[1].Enabled || !m.Clusters[0].Checked {
		t.Fatalf("toggle %+v rows %+v", m.Toggle, m.Clusters)
	}
	for _, op := range []Op{{Kind: OpDown}, {Kind: OpUp}, {Kind: OpDisconnect, CID: "ky3"}, {Kind: OpConnect, CID: "xym"}} {
		if _, ops := Apply(s, ClickEvent{Op: op}); len(ops) != 0 {
			t.Errorf("%v while read-only: %v", op, ops)
		}
	}
	if !m.Quit.Enabled {
		t.Error("Quit disabled for a read-only user")
	}

	// Granted access (e.g. recorded as the operator): the next status says so.
	s, _ = Apply(s, StatusEvent{withAccess(status(2, localapi.SessionSignedIn, cluster("xym", localapi.ClusterDisconnected, false, false)), true)})
	m = Build(s, now)
	if s.ReadOnly || hasNotice(m, "You may only view") || !m.Toggle.Enabled || !m.Clusters[0].Enabled {
		t.Fatalf("still read-only with control: %+v", m)
	}
	if _, ops := Apply(s, ClickEvent{Op: Op{Kind: OpConnect, CID: "xym"}}); len(ops) != 1 {
		t.Errorf("connect with control: %v", ops)
	}

	// A refusal that races the status (access taken away) still turns the
	// menu read-only, until the next status says otherwise.
	s, _ = run(t, s, ClickEvent{Op: Op{Kind: OpConnect, CID: "xym"}},
		DoneEvent{Op: Op{Kind: OpConnect, CID: "xym"}, Err: &api.Error{Status: 403, Code: localapi.CodeForbidden,
			Message: "bob (uid 1001) may only read the VPN status", Hint: "ask an administrator to run: sudo runos vpn install --operator bob"}})
	if m := Build(s, now); !s.ReadOnly || m.Toggle.Enabled || hasNotice(m, "Failed") {
		t.Fatalf("after a refusal: %+v", m)
	}
	s, _ = Apply(s, StatusEvent{withAccess(status(3, localapi.SessionSignedIn), true)})
	if s.ReadOnly {
		t.Fatal("a status with control left the menu read-only")
	}
}

func TestAtLoginReadOnlyReconnectsNothing(t *testing.T) {
	s, ops := run(t, State{AtLogin: true}, StatusEvent{withAccess(status(1, localapi.SessionSignedIn,
		cluster("ky3", localapi.ClusterDisconnected, true, false)), false)})
	if len(ops) != 0 || len(s.Busy) != 0 {
		t.Fatalf("a read-only user's login item asked for %v", ops)
	}
	// With control, the same status reconnects.
	_, ops = run(t, State{AtLogin: true}, StatusEvent{withAccess(status(1, localapi.SessionSignedIn,
		cluster("ky3", localapi.ClusterDisconnected, true, false)), true)})
	if !slices.Equal(ops, []Op{{Kind: OpConnect, CID: "ky3"}}) {
		t.Fatalf("ops %v", ops)
	}
}

func TestErrorShownUntilNextClick(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(1, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterDisconnected, false, false))},
		ClickEvent{Op: Op{Kind: OpConnect, CID: "ky3"}},
		DoneEvent{Op: Op{Kind: OpConnect, CID: "ky3"}, Err: errors.New("connect ky3: control refused: no VPN service on this cluster")})
	m := Build(s, now)
	if !hasNotice(m, "Failed: connect ky3: control refused: no VPN service on this cluster") || m.Icon != IconError {
		t.Fatalf("notices %q icon %v", titles(m.Notices), m.Icon)
	}
	if !m.Clusters[0].Enabled {
		t.Fatalf("row disabled after failure")
	}
	s, _ = Apply(s, ClickEvent{Op: Op{Kind: OpConnect, CID: "ky3"}})
	if hasNotice(Build(s, now), "Failed") {
		t.Fatalf("error kept after the next click")
	}
}

func TestOperationFindsNoDaemon(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(1, localapi.SessionSignedIn)}, ClickEvent{Op: Op{Kind: OpUp}},
		DoneEvent{Op: Op{Kind: OpUp}, Err: fmt.Errorf("connect: %w", localapi.ErrNoDaemon)})
	if s.Link != LinkNoDaemon || Build(s, now).Status.Title != "The RunOS VPN service is not running" {
		t.Fatalf("state %+v", s)
	}
}

func TestWarningsByCode(t *testing.T) {
	// Expired: the menu's own sign-in line says it; the daemon's warning
	// (worded for the CLI) is not repeated.
	st := status(1, localapi.SessionExpired, cluster("ky3", localapi.ClusterDisconnected, true, false))
	st.Warnings = []localapi.Warning{{Code: localapi.WarnSessionExpired, Message: "the session expired: run `runos vpn up` to sign in again (your clusters reconnect)"}}
	s, _ := run(t, State{}, StatusEvent{st})
	if got := titles(Build(s, now).Notices); !slices.Equal(got, []string{"Your sign-in ended at 14:05 (a sign-in lasts 24 hours)"}) {
		t.Errorf("expired notices %q", got)
	}
	// The last hour: the menu has no words of its own, the daemon's show.
	st = status(2, localapi.SessionSignedIn)
	st.Warnings = []localapi.Warning{{Code: localapi.WarnSessionExpiring, Message: "the session ends at 13:05 UTC, in less than an hour"}}
	s, _ = Apply(s, StatusEvent{st})
	if !hasNotice(Build(s, now), "the session ends at 13:05 UTC, in less than an hour") {
		t.Errorf("expiring notices %q", titles(Build(s, now).Notices))
	}
	// A dns warning with no DNS error to show is the only place it is said.
	st = status(3, localapi.SessionSignedIn)
	st.Warnings = []localapi.Warning{{Code: localapi.WarnDNS, Message: "dns: the forwarder stopped"}}
	s, _ = Apply(s, StatusEvent{st})
	if !hasNotice(Build(s, now), "dns: the forwarder stopped") {
		t.Errorf("dns notices %q", titles(Build(s, now).Notices))
	}
}

func TestDaemonNotices(t *testing.T) {
	st := status(1, localapi.SessionSignedIn)
	st.Session.Error = "control unreachable: dial tcp 198.51.100.10:443: i/o timeout"
	st.Tunnel.Error = "create wg1: operation not permitted"
	st.DNS.Error = "another program keeps rewriting resolv.conf"
	st.Warnings = []localapi.Warning{
		{Code: localapi.WarnDNS, Message: "dns: another program keeps rewriting resolv.conf"}, // said once, by the DNS line
		{Code: "from-a-newer-daemon", Message: "daemon version v0.2.0 differs from this app's dev"},
		{Message: "a warning from an older daemon"},
	}
	s, _ := run(t, State{ConfigErr: "config file /x: key \"cid\": invalid cid"}, StatusEvent{st})
	want := []string{
		"Config: config file /x: key \"cid\": invalid cid",
		"Control: control unreachable: dial tcp 198.51.100.10:443: i/o timeout",
		"Tunnel: create wg1: operation not permitted",
		"DNS: another program keeps rewriting resolv.conf",
		"daemon version v0.2.0 differs from this app's dev",
		"a warning from an older daemon",
	}
	m := Build(s, now)
	if got := titles(m.Notices); !slices.Equal(got, want) {
		t.Fatalf("notices\n got %q\nwant %q", got, want)
	}
	for _, n := range m.Notices {
		if n.Enabled || n.Click.Kind != OpNone {
			t.Fatalf("notice is clickable: %+v", n)
		}
	}
}

func TestLongNoticeWraps(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(1, localapi.SessionSignedIn)})
	s.Err = "connect: choose a cluster (ky3, xym): click its row, or set a default with: runos config set cid <cid>"
	m := Build(s, now)
	if len(m.Notices) != 2 || !hasNotice(m, "Failed: "+s.Err) {
		t.Fatalf("notices %q", titles(m.Notices))
	}
	if !strings.HasPrefix(m.Notices[1].Title, "    ") {
		t.Fatalf("continuation not indented: %q", m.Notices[1].Title)
	}
	s.Err = strings.Repeat("word ", 200)
	m = Build(s, now)
	if len(m.Notices) != 3 || !strings.HasSuffix(m.Notices[2].Title, "…") {
		t.Fatalf("notices %q", titles(m.Notices))
	}
	for _, n := range m.Notices {
		if len([]rune(n.Title)) > maxTitle {
			t.Fatalf("row too long: %q", n.Title)
		}
	}
}

func TestConsole(t *testing.T) {
	if m := Build(State{}, now); m.Console.Enabled || m.Console.Title != TitleConsole {
		t.Fatalf("console without URL: %+v", m.Console)
	}
	m := Build(State{ConsoleURL: "https://console.example.com"}, now)
	if !m.Console.Enabled || m.Console.Click.Kind != OpOpenConsole {
		t.Fatalf("console %+v", m.Console)
	}
	if _, ops := Apply(State{ConsoleURL: "https://console.example.com"}, ClickEvent{Op: Op{Kind: OpOpenConsole}}); !slices.Equal(ops, []Op{{Kind: OpOpenConsole}}) {
		t.Fatalf("ops %v", ops)
	}
	if _, ops := Apply(State{}, ClickEvent{Op: Op{Kind: OpOpenConsole}}); len(ops) != 0 {
		t.Fatalf("console without a URL: %v", ops)
	}
	// Without a configured URL, control's URL from the daemon's session.
	st := status(1, localapi.SessionSignedIn)
	st.Session.APIURL = "https://control.example"
	s, _ := Apply(State{}, StatusEvent{st})
	if m := Build(s, now); !m.Console.Enabled || ConsoleURL(s) != "https://control.example" {
		t.Fatalf("console %+v", m.Console)
	}
	// The daemon's session first, then the user's config: after a sign-out
	// (the daemon forgets control's URL) and while the daemon is not
	// running, the configured api-url still opens the console.
	s, _ = Apply(State{APIURL: "https://control.configured"}, StatusEvent{st})
	if u := ConsoleURL(s); u != "https://control.example" {
		t.Fatalf("signed in: console %q", u)
	}
	s, _ = Apply(s, StatusEvent{status(2, localapi.SessionSignedOut)})
	if m := Build(s, now); !m.Console.Enabled || ConsoleURL(s) != "https://control.configured" {
		t.Fatalf("signed out: console %+v", m.Console)
	}
	s, _ = Apply(s, LostEvent{Err: localapi.ErrNoDaemon})
	if m := Build(s, now); !m.Console.Enabled || ConsoleURL(s) != "https://control.configured" {
		t.Fatalf("no daemon: console %+v", m.Console)
	}
	if _, ops := Apply(s, ClickEvent{Op: Op{Kind: OpOpenConsole}}); !slices.Equal(ops, []Op{{Kind: OpOpenConsole}}) {
		t.Fatalf("no daemon: ops %v", ops)
	}
	if m := Build(State{APIURL: "https://control.configured", ConsoleURL: "https://console.example.com"}, now); m.Console.Tooltip != "https://console.example.com" {
		t.Fatalf("--console-url first: %+v", m.Console)
	}
}

// The docs: "At login it reconnects silently and never opens a browser;
// when a fresh sign-in is needed it stays disconnected until you sign in
// from the toggle or the CLI."
func TestAtLoginSessionExpiredStaysDisconnectedOpensNothing(t *testing.T) {
	s, ops := run(t, State{AtLogin: true},
		LostEvent{Err: localapi.ErrNoDaemon}, // the daemon starts after the desktop
		StatusEvent{status(1, localapi.SessionExpired, cluster("ky3", localapi.ClusterDisconnected, true, false))},
		StatusEvent{status(2, localapi.SessionExpired, cluster("ky3", localapi.ClusterDisconnected, true, false))})
	if len(ops) != 0 {
		t.Fatalf("at login with an expired session asked for %v", ops)
	}
	m := Build(s, now)
	if m.Toggle.Title != TitleSignIn || m.Status.Title != TitleSignInNeeded || m.Clusters[0].Checked {
		t.Fatalf("menu %+v", m)
	}
	// The user signs in with the CLI (`runos vpn up`): the menu follows,
	// and the desktop starts nothing of its own.
	s, ops = run(t, s,
		StatusEvent{status(3, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterConnecting, true, false))},
		StatusEvent{status(4, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterConnected, true, true))})
	if len(ops) != 0 {
		t.Fatalf("ops after the CLI signed in: %v", ops)
	}
	m = Build(s, now)
	if m.Toggle.Title != TitleDisconnect || !m.Clusters[0].Checked || m.Icon != IconConnected {
		t.Fatalf("menu did not follow: %+v", m)
	}
}

// The docs' other way out at login: "until you sign in from the toggle".
// The click on "Sign in…" is what asks for up (the only op that opens a
// browser), once; while the browser waits, nothing asks again.
func TestAtLoginSessionExpiredSignInClick(t *testing.T) {
	expired := status(1, localapi.SessionExpired, cluster("ky3", localapi.ClusterDisconnected, true, false))
	s, ops := run(t, State{AtLogin: true}, StatusEvent{expired})
	if len(ops) != 0 {
		t.Fatalf("ops before the click: %v", ops)
	}
	m := Build(s, now)
	if m.Toggle.Title != TitleSignIn || !m.Toggle.Enabled || m.Toggle.Click != (Op{Kind: OpUp}) {
		t.Fatalf("toggle %+v", m.Toggle)
	}
	s, ops = run(t, s, ClickEvent{Op: m.Toggle.Click})
	if !slices.Equal(ops, []Op{{Kind: OpUp}}) {
		t.Fatalf("ops after the click: %v", ops)
	}
	if m := Build(s, now); m.Toggle.Title != "Connecting…" || m.Toggle.Enabled {
		t.Fatalf("toggle while up runs %+v", m.Toggle)
	}
	// The browser opens (the app says so); the toggle cancels it now, and
	// more clicks and statuses start no second up.
	s, ops = run(t, s, SignInEvent{Active: true}, ClickEvent{Op: Op{Kind: OpUp}},
		ClickEvent{Op: Op{Kind: OpUp, CID: "ky3"}}, StatusEvent{status(2, localapi.SessionExpired, cluster("ky3", localapi.ClusterDisconnected, true, false))})
	if len(ops) != 0 {
		t.Fatalf("a second up: %v", ops)
	}
	m = Build(s, now)
	if m.Toggle.Click.Kind != OpCancelSignIn || m.Status.Title != "Signing in… finish in your browser" || m.Icon != IconSignIn {
		t.Fatalf("menu while signing in %+v", m)
	}
	// Signed in; the daemon restores ky3.
	s, ops = run(t, s, SignInEvent{Active: false},
		DoneEvent{Op: Op{Kind: OpUp}, Status: status(3, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterConnecting, true, false))},
		StatusEvent{status(4, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterConnected, true, true))})
	if len(ops) != 0 {
		t.Fatalf("ops after the sign-in: %v", ops)
	}
	if m := Build(s, now); m.Toggle.Title != TitleDisconnect || !m.Clusters[0].Checked || m.Icon != IconConnected || len(m.Notices) != 0 {
		t.Fatalf("menu after the sign-in %+v", m)
	}
}

func TestAtLoginSessionValidReconnects(t *testing.T) {
	s, ops := run(t, State{AtLogin: true},
		StatusEvent{status(7, localapi.SessionSignedIn,
			cluster("ky3", localapi.ClusterDisconnected, true, false), // wanted, not restored
			cluster("xym", localapi.ClusterConnecting, true, false),   // the daemon restores it
			cluster("abc", localapi.ClusterDisconnected, false, false))})
	if !slices.Equal(ops, []Op{{Kind: OpConnect, CID: "ky3"}}) {
		t.Fatalf("ops %v", ops)
	}
	if m := Build(s, now); m.Clusters[0].Title != "ky3 — connecting…" || m.Clusters[0].Enabled {
		t.Fatalf("row %+v", m.Clusters[0])
	}
	// Decided once: later statuses (and a daemon restart) start nothing more.
	_, ops = run(t, s, DoneEvent{Op: Op{Kind: OpConnect, CID: "ky3"}},
		StatusEvent{status(8, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterDisconnected, true, false))},
		LostEvent{Err: localapi.ErrNoDaemon},
		StatusEvent{status(1, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterDisconnected, true, false))})
	if len(ops) != 0 {
		t.Fatalf("later ops %v", ops)
	}
}

func TestAtLoginWaitsForTheDaemon(t *testing.T) {
	_, ops := run(t, State{AtLogin: true},
		LostEvent{Err: localapi.ErrNoDaemon}, LostEvent{Err: localapi.ErrNoDaemon},
		StatusEvent{status(1, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterDisconnected, true, false))})
	if !slices.Equal(ops, []Op{{Kind: OpConnect, CID: "ky3"}}) {
		t.Fatalf("ops %v", ops)
	}
}

func TestAtLoginNothingWanted(t *testing.T) {
	_, ops := run(t, State{AtLogin: true}, StatusEvent{status(1, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterDisconnected, false, false))})
	if len(ops) != 0 {
		t.Fatalf("ops %v", ops)
	}
	_, ops = run(t, State{AtLogin: true}, StatusEvent{status(1, localapi.SessionSignedOut)})
	if len(ops) != 0 {
		t.Fatalf("ops %v", ops)
	}
}

func TestNotAtLoginNoReconnect(t *testing.T) {
	_, ops := run(t, State{}, StatusEvent{status(1, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterDisconnected, true, false))})
	if len(ops) != 0 {
		t.Fatalf("ops %v", ops)
	}
}

func TestWhen(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{expires, "14:05"},
		{expires.UTC(), "14:05"}, // shown in the local zone
		{now.Add(20 * time.Hour), "Wed 05:30"},
		{now.Add(-20 * time.Hour), "9 Mar 13:30"},
		{now.Add(10 * 24 * time.Hour), "20 Mar 09:30"},
	} {
		if got := when(tc.t, now); got != tc.want {
			t.Errorf("when(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

func TestEqual(t *testing.T) {
	s, _ := run(t, State{}, StatusEvent{status(1, localapi.SessionSignedIn, cluster("ky3", localapi.ClusterConnected, true, true))})
	a, b := Build(s, now), Build(s, now)
	if !a.Equal(b) {
		t.Fatal("same state, different menus")
	}
	b.Clusters[0].Checked = false
	if a.Equal(b) {
		t.Fatal("a changed row compares equal")
	}
}

// TestKeptConfiguration: a cluster up on the configuration the daemon
// kept while control is unreachable says so in its row, with the words
// of status; the full text is in the tooltip when the row is clipped.
func TestKeptConfiguration(t *testing.T) {
	ky3 := cluster("ky3", localapi.ClusterConnected, true, true)
	msg := "control unreachable since 2026-03-10 08:20 UTC; using the configuration of 2026-03-10 08:02 UTC"
	ky3.Kept = &localapi.KeptConfig{Message: msg}
	s, _ := run(t, State{}, StatusEvent{status(3, localapi.SessionSignedIn, ky3)})
	m := Build(s, now)
	row := m.Clusters[0]
	if full := "ky3 — " + msg; row.Title != clip(full) || !strings.Contains(row.Tooltip, msg) && row.Title != full {
		t.Fatalf("row %q, tooltip %q", row.Title, row.Tooltip)
	}
	if !row.Checked || m.Icon != IconConnected {
		t.Errorf("a cluster up on the kept configuration is still connected: %+v, icon %v", row, m.Icon)
	}
}
