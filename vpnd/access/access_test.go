package access

import (
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runos/vpn/platform"
)

func TestCheck(t *testing.T) {
	pol := Policy{
		Operator: func() (*Operator, error) { return &Operator{UID: 1000, User: "alice"}, nil },
		InGroup:  func(uid, gid int, g string) bool { return g == Group && (uid == 1002 || gid == 500) },
		UserName: func(uid int) string { return map[int]string{1000: "alice", 1001: "bob", 1002: "carol"}[uid] },
	}
	user := func(uid int) Caller { return Caller{Cred: platform.PeerCred{UID: uid, GID: 100}} }
	root := Caller{Cred: platform.PeerCred{UID: 0, GID: 0, Admin: true}}
	unknown := Caller{Cred: platform.PeerCred{UID: -1, GID: -1}, Err: errors.New("no SO_PEERCRED")}

	for _, tc := range []struct {
		name    string
		method  string
		host    string
		headers map[string]string
		caller  Caller
		allow   bool
		inMsg   string // the refusal says this (message or hint)
	}{
		{"anyone reads status", "GET", Host, nil, user(1001), true, ""},
		{"unknown identity reads", "GET", Host, nil, unknown, true, ""},
		{"root changes", "POST", Host, nil, root, true, ""},
		{"operator changes", "POST", Host, nil, user(1000), true, ""},
		{"group member changes", "DELETE", Host, nil, user(1002), true, ""},
		{"primary group runos", "POST", Host, nil, Caller{Cred: platform.PeerCred{UID: 1003, GID: 500}}, true, ""},
		{"other user refused", "POST", Host, nil, user(1001), false, "sudo runos vpn install --operator bob"},
		{"other user named in message", "POST", Host, nil, user(1001), false, "bob (uid 1001) may only read"},
		{"nameless user gets $USER", "POST", Host, nil, user(4242), false, "--operator $USER"},
		{"unknown identity refused", "POST", Host, nil, unknown, false, "identity is unknown"},
		{"origin refused even for root", "GET", Host, map[string]string{"Origin": "https://evil.example"}, root, false, "web pages"},
		{"referer refused", "POST", Host, map[string]string{"Referer": "https://evil.example/x"}, root, false, "web pages"},
		{"null origin refused", "GET", Host, map[string]string{"Origin": "null"}, root, false, "web pages"},
		{"rebound host refused", "GET", "evil.example", nil, root, false, "answers only requests for local.runos"},
		{"localhost host refused", "POST", "localhost", nil, root, false, "local.runos"},
		{"host with port refused", "GET", "local.runos:8080", nil, root, false, "local.runos"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "http://local.runos/v1/status", nil)
			r.Host = tc.host
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			ref := pol.Check(r, tc.caller)
			if tc.allow {
				if ref != nil {
					t.Fatalf("refused: %+v", ref)
				}
				return
			}
			if ref == nil {
				t.Fatal("allowed")
			}
			if ref.Status != 403 || ref.Code != "forbidden" {
				t.Errorf("refusal %+v", ref)
			}
			if !strings.Contains(ref.Message+" "+ref.Hint, tc.inMsg) {
				t.Errorf("refusal %q / %q does not say %q", ref.Message, ref.Hint, tc.inMsg)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	pol := Policy{
		Operator: func() (*Operator, error) { return &Operator{UID: 1000, User: "alice"}, nil },
		InGroup:  func(uid, gid int, g string) bool { return g == Group && uid == 1002 },
		UserName: func(uid int) string { return map[int]string{0: "root", 1000: "alice", 1001: "bob", 1002: "carol"}[uid] },
	}
	for _, tc := range []struct {
		name    string
		caller  Caller
		control bool
		reason  string
		hint    string
	}{
		{"root", Caller{Cred: platform.PeerCred{UID: 0, Admin: true}}, true, "root and may change the VPN state", ""},
		{"windows administrator", Caller{Cred: platform.PeerCred{UID: -1, GID: -1, Admin: true, SID: "S-1-5-18"}}, true, "an administrator and may change", ""},
		{"operator", Caller{Cred: platform.PeerCred{UID: 1000, GID: 100}}, true, "alice (uid 1000) is the operator recorded at install and may change the VPN state", ""},
		{"group member", Caller{Cred: platform.PeerCred{UID: 1002, GID: 100}}, true, "carol (uid 1002) is a member of the runos group and may change the VPN state", ""},
		{"other user", Caller{Cred: platform.PeerCred{UID: 1001, GID: 100}}, false,
			"bob (uid 1001) may only read the VPN status: changing it is for root, the operator recorded at install and members of the runos group",
			"ask an administrator to run: sudo runos vpn install --operator bob"},
		{"unknown identity", Caller{Cred: platform.PeerCred{UID: -1, GID: -1}, Err: errors.New("no SO_PEERCRED")}, false,
			"the caller's identity is unknown (no SO_PEERCRED), so it may only read the VPN status",
			"ask an administrator to run: sudo runos vpn install --operator $USER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := pol.Decide(tc.caller)
			if d.Control != tc.control || !strings.Contains(d.Reason, tc.reason) || d.Hint != tc.hint {
				t.Errorf("Decide = %+v, want control %v, reason %q, hint %q", d, tc.control, tc.reason, tc.hint)
			}
			// Check refuses a change exactly when Decide says no, in the
			// same words: one rule, not two copies of it.
			r := httptest.NewRequest("POST", "http://local.runos/v1/connect", nil)
			ref := pol.Check(r, tc.caller)
			if (ref == nil) != d.Control {
				t.Fatalf("Check %+v disagrees with Decide %+v", ref, d)
			}
			if ref != nil && (ref.Message != d.Reason || ref.Hint != d.Hint) {
				t.Errorf("refusal %q / %q, decision %q / %q", ref.Message, ref.Hint, d.Reason, d.Hint)
			}
		})
	}
}

func TestOperatorFailsClosed(t *testing.T) {
	pol := Policy{Operator: func() (*Operator, error) { return nil, errors.New("malformed") }}
	r := httptest.NewRequest("POST", "http://local.runos/v1/connect", nil)
	if pol.Check(r, Caller{Cred: platform.PeerCred{UID: 1000}}) == nil {
		t.Error("a broken operator record let a user change state")
	}
	pol = Policy{} // no facts at all: only root
	if pol.Check(r, Caller{Cred: platform.PeerCred{UID: 1000}}) == nil {
		t.Error("empty policy let a user change state")
	}
	if pol.Check(r, Caller{Cred: platform.PeerCred{UID: 0, Admin: true}}) != nil {
		t.Error("empty policy refused root")
	}
}

func TestOperatorFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if op, err := ReadOperator(dir); op != nil || err != nil {
		t.Fatalf("no record: %v %v", op, err)
	}
	if err := WriteOperator(dir, Operator{UID: 1000, User: "alice"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, OperatorFile))
	if strings.TrimSpace(string(b)) != `{"uid":1000,"user":"alice"}` {
		t.Errorf("operator.json = %s", b)
	}
	if fi, _ := os.Stat(filepath.Join(dir, OperatorFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	op, err := ReadOperator(dir)
	if err != nil || *op != (Operator{UID: 1000, User: "alice"}) {
		t.Errorf("read back %v %v", op, err)
	}
	if err := WriteOperator(dir, Operator{UID: 5}); err == nil {
		t.Error("operator without a name accepted")
	}
	if err := WriteOperator(dir, Operator{UID: -1, User: `PC\alice`}); err == nil {
		t.Error("operator without a uid or a SID accepted")
	}
	os.WriteFile(filepath.Join(dir, OperatorFile), []byte("{"), 0o600)
	if _, err := ReadOperator(dir); err == nil || !strings.Contains(err.Error(), "runos vpn install --operator") {
		t.Errorf("malformed record: %v", err)
	}
}

func TestSystemPolicyRoot(t *testing.T) {
	// The real user database: root exists everywhere; no runos group is
	// needed for this to hold.
	p := SystemPolicy(t.TempDir())
	if p.UserName(0) != "root" {
		t.Errorf("UserName(0) = %q", p.UserName(0))
	}
	if p.InGroup(0, 0, "no-such-group-runos-test") {
		t.Error("member of a group that does not exist")
	}
}

func TestWindowsOperatorBySID(t *testing.T) {
	dir := t.TempDir()
	op := Operator{UID: -1, User: `PC\alice`, SID: "S-1-5-21-1-2-3-1001"}
	if err := WriteOperator(dir, op); err != nil {
		t.Fatal(err)
	}
	pol := SystemPolicy(dir)
	pol.GroupSID = nil // no local runos group here
	r := httptest.NewRequest("POST", "http://local.runos/v1/connect", nil)
	pipe := func(sid string) Caller { return Caller{Cred: platform.PeerCred{UID: -1, GID: -1, SID: sid}} }
	if ref := pol.Check(r, pipe("S-1-5-21-1-2-3-1001")); ref != nil {
		t.Errorf("the operator's SID refused: %+v", ref)
	}
	if pol.Check(r, pipe("S-1-5-21-1-2-3-1002")) == nil {
		t.Error("another SID allowed")
	}
	if pol.Check(r, pipe("")) == nil {
		t.Error("a caller without a SID allowed")
	}
	// A Unix operator record never matches a SID-less caller by uid -1.
	if err := WriteOperator(dir, Operator{UID: 1000, User: "alice"}); err != nil {
		t.Fatal(err)
	}
	if pol.Check(r, pipe("S-1-5-21-1-2-3-1001")) == nil {
		t.Error("a SID matched a record without one")
	}
}

// windowsPolicy is a Windows machine in fakes: the operator PC\alice by
// SID, a local runos group (S-…-1010) that the token of PC\carol holds,
// and PC\bob in neither.
func windowsPolicy(groupErr error) (Policy, map[string]platform.PeerCred) {
	const runosGroup = "S-1-5-21-1-2-3-1010"
	users := []string{"S-1-1-0", "S-1-5-32-545", "S-1-5-11"} // Everyone, Users, Authenticated Users
	pol := Policy{
		Operator: func() (*Operator, error) {
			return &Operator{UID: -1, User: `PC\alice`, SID: "S-1-5-21-1-2-3-1001"}, nil
		},
		InGroup: func(int, int, string) bool { panic("a SID caller's groups are its token's, not the user database's") },
		GroupSID: func(group string) (string, error) {
			if group != Group {
				return "", errors.New("no such group " + group)
			}
			return runosGroup, groupErr
		},
		AccountName: func(sid string) string {
			return map[string]string{"S-1-5-21-1-2-3-1001": `PC\alice`, "S-1-5-21-1-2-3-1002": `PC\bob`,
				"S-1-5-21-1-2-3-1003": `PC\carol`, "S-1-5-21-1-2-3-1004": `PC\Dana Scully`, "S-1-5-18": `NT AUTHORITY\SYSTEM`}[sid]
		},
		Words: &WindowsWords,
	}
	callers := map[string]platform.PeerCred{
		"alice":  {UID: -1, GID: -1, SID: "S-1-5-21-1-2-3-1001", GroupSIDs: users},
		"bob":    {UID: -1, GID: -1, SID: "S-1-5-21-1-2-3-1002", GroupSIDs: users},
		"carol":  {UID: -1, GID: -1, SID: "S-1-5-21-1-2-3-1003", GroupSIDs: append(slices.Clone(users), runosGroup)},
		"dana":   {UID: -1, GID: -1, SID: "S-1-5-21-1-2-3-1004", GroupSIDs: users},
		"admin":  {UID: -1, GID: -1, SID: "S-1-5-21-1-2-3-500", Admin: true, GroupSIDs: append(slices.Clone(users), "S-1-5-32-544")},
		"system": {UID: -1, GID: -1, SID: "S-1-5-18", Admin: true},
		// A stranger's token claiming the group's SID as its user SID
		// (impossible, but a group SID is not a user).
		"group-as-user": {UID: -1, GID: -1, SID: runosGroup},
	}
	return pol, callers
}

func TestDecideWindows(t *testing.T) {
	pol, callers := windowsPolicy(nil)
	const hint = `ask an administrator to run, in a terminal opened with "Run as administrator": runos vpn install --operator `
	for _, tc := range []struct {
		caller  string
		control bool
		reason  string
		hint    string
	}{
		{"alice", true, `PC\alice is the operator recorded at install and may change the VPN state`, ""},
		{"carol", true, `PC\carol is a member of the local runos group and may change the VPN state`, ""},
		{"admin", true, "an administrator and may change the VPN state", ""},
		{"system", true, "an administrator and may change the VPN state", ""},
		{"bob", false, `PC\bob may only read the VPN status: changing it is for administrators, the operator recorded at install and members of the local runos group (from their next sign-in after being added)`,
			hint + `PC\bob`},
		{"dana", false, `PC\Dana Scully may only read`, hint + `"PC\Dana Scully"`},
		{"group-as-user", false, "this user may only read", hint + "%USERNAME%"},
	} {
		t.Run(tc.caller, func(t *testing.T) {
			c := Caller{Cred: callers[tc.caller]}
			d := pol.Decide(c)
			if d.Control != tc.control || !strings.Contains(d.Reason, tc.reason) || d.Hint != tc.hint {
				t.Errorf("Decide = %+v\nwant control %v, reason %q, hint %q", d, tc.control, tc.reason, tc.hint)
			}
			r := httptest.NewRequest("POST", "http://local.runos/v1/connect", nil)
			if ref := pol.Check(r, c); (ref == nil) != tc.control {
				t.Errorf("Check %+v disagrees with Decide %+v", ref, d)
			}
		})
	}
	unknown := pol.Decide(Caller{Cred: platform.PeerCred{UID: -1, GID: -1}, Err: errors.New("no pipe client")})
	if unknown.Control || unknown.Hint != hint+"%USERNAME%" {
		t.Errorf("unknown caller: %+v", unknown)
	}

	// No local runos group (or it cannot be looked up): its SID in a token
	// grants nothing, and the operator and administrators still may.
	pol, callers = windowsPolicy(errors.New("local group runos: not found"))
	for name, want := range map[string]bool{"carol": false, "alice": true, "admin": true, "bob": false} {
		if got := pol.Decide(Caller{Cred: callers[name]}).Control; got != want {
			t.Errorf("without the group, %s: control %v, want %v", name, got, want)
		}
	}
	// Nor does a token's group list when the policy cannot look the group up.
	pol, callers = windowsPolicy(nil)
	pol.GroupSID = nil
	if pol.Decide(Caller{Cred: callers["carol"]}).Control {
		t.Error("a group member allowed with no way to name the group's SID")
	}
	// A SID caller with the kernel's identity in doubt only reads.
	if pol.Decide(Caller{Cred: callers["alice"], Err: errors.New("token")}).Control {
		t.Error("a caller with an identity error allowed")
	}
}

// TestWordsPerOS: each OS's hint names the command that works there, and a
// Unix caller is never told about an elevated prompt nor the reverse.
func TestWordsPerOS(t *testing.T) {
	bob := Caller{Cred: platform.PeerCred{UID: 1001, GID: 100}}
	unix := Policy{UserName: func(int) string { return "bob" }}
	if d := unix.Decide(bob); d.Hint != "ask an administrator to run: sudo runos vpn install --operator bob" ||
		!strings.Contains(d.Reason, "for root,") {
		t.Errorf("Unix: %+v", d)
	}
	unix.Words = &UnixWords
	if d := unix.Decide(bob); d.Hint != "ask an administrator to run: sudo runos vpn install --operator bob" {
		t.Errorf("UnixWords: %+v", d)
	}
	pol, callers := windowsPolicy(nil)
	d := pol.Decide(Caller{Cred: callers["bob"]})
	if strings.Contains(d.Hint, "sudo") || !strings.Contains(d.Hint, `"Run as administrator": runos vpn install --operator PC\bob`) ||
		!strings.Contains(d.Reason, "for administrators,") {
		t.Errorf("Windows: %+v", d)
	}
	for name, w := range map[string]Words{"unix": UnixWords, "windows": WindowsWords} {
		if w.Admin == "" || w.Members == "" || w.AnyUser == "" || w.Grant == nil || !strings.Contains(w.Grant("x"), "runos vpn install --operator x") ||
			w.Direct == nil || !strings.Contains(w.Direct(), "Host") && !strings.Contains(w.Direct(), "http://"+Host) {
			t.Errorf("%s words incomplete: %+v", name, w)
		}
	}
	// Another Host: Unix is shown curl on the socket, Windows (no curl for
	// named pipes) the CLI and the header a pipe client must send.
	r := httptest.NewRequest("GET", "http://localhost/v1/status", nil)
	if ref := unix.Check(r, bob); ref == nil || !strings.HasPrefix(ref.Hint, "curl --unix-socket ") {
		t.Errorf("Unix host refusal: %+v", ref)
	}
	if ref := pol.Check(r, Caller{Cred: callers["bob"]}); ref == nil || strings.Contains(ref.Hint, "curl") ||
		!strings.Contains(ref.Hint, "runos vpn status --json") || !strings.Contains(ref.Hint, "Host: "+Host) {
		t.Errorf("Windows host refusal: %+v", ref)
	}
	if g := GrantHint(); !strings.Contains(g, "runos vpn install --operator "+systemWords.AnyUser) {
		t.Errorf("GrantHint %q", g)
	}
	// This machine's policy speaks this machine's words.
	if SystemPolicy(t.TempDir()).Words != &systemWords {
		t.Error("SystemPolicy does not use systemWords")
	}
}

// BenchmarkDecideSystem is the cost the daemon pays per status it sends a
// caller (GET /v1/status, each watcher's every line): the operator record
// and the user database, read each time so a change shows at once.
func BenchmarkDecideSystem(b *testing.B) {
	dir := b.TempDir()
	if err := WriteOperator(dir, Operator{UID: 1000, User: "alice"}); err != nil {
		b.Fatal(err)
	}
	p := SystemPolicy(dir)
	for _, c := range []struct {
		name   string
		caller Caller
	}{
		{"root", Caller{Cred: platform.PeerCred{UID: 0, Admin: true}}},
		{"operator", Caller{Cred: platform.PeerCred{UID: 1000, GID: 1000}}},
		{"other", Caller{Cred: platform.PeerCred{UID: 65534, GID: 65534}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				p.Decide(c.caller)
			}
		})
	}
}
