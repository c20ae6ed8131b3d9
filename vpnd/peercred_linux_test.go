package vpnd

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
)

// curlAs runs curl against the daemon's socket as uid (a real process
// under another identity: the daemon sees it through SO_PEERCRED).
func curlAs(t *testing.T, uid uint32, sock, method, path, body string) (int, []byte) {
	t.Helper()
	return curlAsGroup(t, uid, 65534, sock, method, path, body)
}

// curlAsGroup is curlAs with the caller's primary group too.
func curlAsGroup(t *testing.T, uid, gid uint32, sock, method, path, body string) (int, []byte) {
	t.Helper()
	args := []string{"-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", sock, "-X", method}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "-d", body)
	}
	cmd := exec.Command("curl", append(args, "http://local.runos"+path)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl as uid %d: %v", uid, err)
	}
	i := strings.LastIndexByte(string(out), '\n')
	code, _ := strconv.Atoi(strings.TrimSpace(string(out[i+1:])))
	return code, out[:i]
}

func TestPeerCredentialsOtherUser(t *testing.T) {
	netnstest.Require(t, "curl")
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	// A socket directory every user may enter, as /run/runos is.
	sockDir, err := os.MkdirTemp("", "vpnd-peercred")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	os.Chmod(sockDir, 0o755)
	stateDir := t.TempDir()
	td := startDaemon(t, w, stateDir)
	sock := serve(t, td.daemon, sockDir, access.SystemPolicy(stateDir))

	const nobody = 65534
	code, body := curlAs(t, nobody, sock, "GET", "/v1/status", "")
	var st localapi.Status
	if code != 200 || json.Unmarshal(body, &st) != nil || st.Session.State != localapi.SessionSignedOut {
		t.Fatalf("status as nobody: %d %s", code, body)
	}
	code, body = curlAs(t, nobody, sock, "POST", "/v1/connect", `{"cid":"ky3"}`)
	var eb api.ErrorBody
	if code != 403 || json.Unmarshal(body, &eb) != nil || eb.Error.Code != localapi.CodeForbidden ||
		!strings.Contains(eb.Error.Hint, "ask an administrator to run: sudo runos vpn install --operator nobody") ||
		!strings.Contains(eb.Error.Message, "uid 65534") {
		t.Fatalf("connect as nobody: %d %s", code, body)
	}
	code, _ = curlAs(t, nobody, sock, "DELETE", "/v1/session", "")
	if code != 403 {
		t.Errorf("down as nobody: %d", code)
	}

	// Recorded as the operator, the same user may steer: it gets past the
	// check (and is told it is signed out).
	if err := access.WriteOperator(stateDir, access.Operator{UID: nobody, User: "nobody"}); err != nil {
		t.Fatal(err)
	}
	code, body = curlAs(t, nobody, sock, "POST", "/v1/connect", `{"cid":"ky3"}`)
	if code != 409 || !strings.Contains(string(body), "not signed in: run `runos vpn up`") {
		t.Fatalf("connect as the operator: %d %s", code, body)
	}
	// Another unprivileged user is still refused.
	if code, _ := curlAs(t, nobody-1, sock, "POST", "/v1/connect", `{"cid":"ky3"}`); code != 403 {
		t.Errorf("connect as uid %d: %d", nobody-1, code)
	}
}

// watchAs follows /v1/watch as uid:gid with curl (a real process under that
// identity) and returns its lines, one Status each.
func watchAs(t *testing.T, uid, gid uint32, sock string) <-chan localapi.Status {
	t.Helper()
	cmd := exec.Command("curl", "-sN", "--unix-socket", sock, "http://local.runos/v1/watch")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("curl watch as uid %d: %v", uid, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan localapi.Status, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		for sc.Scan() {
			var st localapi.Status
			if json.Unmarshal(sc.Bytes(), &st) != nil {
				return
			}
			lines <- st
		}
	}()
	return lines
}

func nextLine(t *testing.T, who string, lines <-chan localapi.Status) localapi.Status {
	t.Helper()
	select {
	case st, ok := <-lines:
		if !ok {
			t.Fatalf("%s: the watch stream ended", who)
		}
		return st
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no line on the watch stream", who)
	}
	panic("unreachable")
}

// TestStatusAccessPerCaller: every status the daemon answers says what its
// caller may do, from the caller's own kernel-verified identity — on GET
// /v1/status and on every line of each watcher's stream, so watchers under
// different users get different access from the same change.
func TestStatusAccessPerCaller(t *testing.T) {
	netnstest.Require(t, "curl")
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	sockDir, err := os.MkdirTemp("", "vpnd-access")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	os.Chmod(sockDir, 0o755)
	stateDir := t.TempDir()
	td := startDaemon(t, w, stateDir)

	const (
		nobody   = 65534
		operator = 65533 // recorded at install
		member   = 65532 // its primary group is the runos group
		runosGID = 65531
	)
	if err := access.WriteOperator(stateDir, access.Operator{UID: operator, User: "opuser"}); err != nil {
		t.Fatal(err)
	}
	// The real operator record and user database; the runos group is
	// runosGID, matched against the gid the kernel reports for the caller
	// (creating a real system group would touch the whole machine).
	pol := access.SystemPolicy(stateDir)
	pol.InGroup = func(uid, gid int, group string) bool { return group == access.Group && gid == runosGID }
	sock := serve(t, td.daemon, sockDir, pol)

	type caller struct {
		name     string
		uid, gid uint32
		control  bool
		reason   string
		hint     string
	}
	callers := []caller{
		{"root", 0, 0, true, "root and may change the VPN state", ""},
		{"operator", operator, 65534, true, "uid 65533 is the operator recorded at install and may change the VPN state", ""},
		{"group member", member, runosGID, true, "uid 65532 is a member of the runos group and may change the VPN state", ""},
		{"other user", nobody, 65534, false, "nobody (uid 65534) may only read the VPN status",
			"ask an administrator to run: sudo runos vpn install --operator nobody"},
	}
	check := func(c caller, where string, st localapi.Status) {
		t.Helper()
		a := st.Access
		if a == nil || a.Control != c.control || !strings.Contains(a.Reason, c.reason) || a.Hint != c.hint {
			t.Errorf("%s, %s: access %+v, want control %v, reason %q, hint %q", c.name, where, a, c.control, c.reason, c.hint)
		}
	}
	watches := make([]<-chan localapi.Status, len(callers))
	for i, c := range callers {
		code, body := curlAsGroup(t, c.uid, c.gid, sock, "GET", "/v1/status", "")
		var st localapi.Status
		if code != 200 || json.Unmarshal(body, &st) != nil {
			t.Fatalf("%s: status %d %s", c.name, code, body)
		}
		check(c, "GET /v1/status", st)
		watches[i] = watchAs(t, c.uid, c.gid, sock)
		check(c, "first watch line", nextLine(t, c.name, watches[i]))
	}
	// One change reaches every watcher, each with its own access.
	if _, err := localapi.NewClient(sock).SetSession(context.Background(), localapi.SessionRequest{APIURL: w.url, AccessToken: "tok1"}); err != nil {
		t.Fatal(err)
	}
	for i, c := range callers {
		for {
			st := nextLine(t, c.name, watches[i])
			check(c, "watch line after a change", st)
			if st.Session.State == localapi.SessionSignedIn {
				break
			}
		}
	}
	// The field and the refusal are one decision: the other user is refused
	// in the very words its status gave.
	code, body := curlAs(t, nobody, sock, "POST", "/v1/disconnect", `{"cid":"ky3"}`)
	var eb api.ErrorBody
	if code != 403 || json.Unmarshal(body, &eb) != nil || !strings.Contains(eb.Error.Message, callers[3].reason) || eb.Error.Hint != callers[3].hint {
		t.Fatalf("disconnect as nobody: %d %s", code, body)
	}
	// Decided per request: recorded as the operator now, nobody's next
	// status says it may steer, without a restart.
	if err := access.WriteOperator(stateDir, access.Operator{UID: nobody, User: "nobody"}); err != nil {
		t.Fatal(err)
	}
	_, body = curlAs(t, nobody, sock, "GET", "/v1/status", "")
	var st localapi.Status
	if json.Unmarshal(body, &st) != nil || st.Access == nil || !st.Access.Control || !strings.Contains(st.Access.Reason, "operator recorded at install") {
		t.Errorf("status as the new operator: %s", body)
	}
}
