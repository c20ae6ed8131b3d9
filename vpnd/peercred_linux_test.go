package vpnd

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/control/api"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
)

// curlAs runs curl against the daemon's socket as uid (a real process
// under another identity: the daemon sees it through SO_PEERCRED).
func curlAs(t *testing.T, uid uint32, sock, method, path, body string) (int, []byte) {
	t.Helper()
	args := []string{"-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", sock, "-X", method}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "-d", body)
	}
	cmd := exec.Command("curl", append(args, "http://local.runos"+path)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: 65534}}
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
