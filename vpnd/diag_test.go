package vpnd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/logring"
)

// TestDiagnosticsRoutes: GET /v1/status carries the daemon's counters
// (the derived status and the stream do not), POST /v1/probe makes a fresh
// handshake and says when it happened, GET /v1/logs serves the ring to
// those who may steer the daemon and refuses everyone else.
func TestDiagnosticsRoutes(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	ring := logring.New(10)
	fmt.Fprintln(ring, "level=INFO msg=\"runos vpnd serving\"")
	pol := access.Policy{
		Operator: func() (*access.Operator, error) { return &access.Operator{UID: 1000, User: "alice"}, nil },
		UserName: func(uid int) string { return map[int]string{1000: "alice", 1001: "bob"}[uid] },
	}
	h := (&server{d: td.daemon, policy: pol, logs: ring}).handler()
	alice := access.Caller{Cred: platform.PeerCred{UID: 1000, GID: 1000}}
	bob := access.Caller{Cred: platform.PeerCred{UID: 1001, GID: 1001}}
	do := func(c access.Caller, method, path, body string, out any) int {
		t.Helper()
		r := httptest.NewRequest(method, "http://local.runos"+path, strings.NewReader(body))
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if out != nil {
			if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, rec.Body)
			}
		}
		return rec.Code
	}
	if code := do(alice, "POST", "/v1/session", `{"apiUrl":"`+w.url+`","accessToken":"tok1"}`, nil); code != 200 {
		t.Fatalf("session: %d", code)
	}
	if code := do(alice, "POST", "/v1/connect", `{"cid":"ky3"}`, nil); code != 200 {
		t.Fatalf("connect: %d", code)
	}
	eventually(t, "ky3 up", func() bool { st := td.Status(); c, ok := clusterOf(&st, "ky3"); return ok && c.PeerUp })

	// A new handshake is made and waited for (the fake's handshake is aged
	// past wireguard-go's 5 s, within which the probe would wait first).
	td.eng.mu.Lock()
	for k, p := range td.eng.peers {
		p.LastHandshake = p.LastHandshake.Add(-time.Minute)
		td.eng.peers[k] = p
	}
	td.eng.mu.Unlock()
	var pr localapi.ProbeResult
	before := time.Now()
	if code := do(alice, "POST", "/v1/probe", `{"cid":"ky3"}`, &pr); code != 200 || !pr.OK || pr.LastHandshake.Before(before) ||
		pr.Endpoint != "10.1.0.2:32768" {
		t.Errorf("probe ky3: %d %+v", code, pr)
	}
	var perr struct{ Error localapi.Error }
	if code := do(alice, "POST", "/v1/probe", `{"cid":"xym"}`, &perr); code != 409 || !strings.Contains(perr.Error.Message, "not connected") {
		t.Errorf("probe of a cluster not connected: %d %+v", code, perr)
	}
	if code := do(bob, "POST", "/v1/probe", `{"cid":"ky3"}`, nil); code != 403 {
		t.Errorf("probe by a reader: %d, want 403", code)
	}

	var st localapi.Status
	do(bob, "GET", "/v1/status", "", &st)
	if st.Metrics == nil || len(st.Metrics.Clusters) != 1 || st.Metrics.Clusters[0].CID != "ky3" || st.Metrics.Clusters[0].Handshakes < 2 {
		t.Errorf("status metrics: %+v", st.Metrics)
	}
	if td.Status().Metrics != nil {
		t.Error("the derived status carries metrics")
	}

	var lg localapi.Logs
	if code := do(alice, "GET", "/v1/logs", "", &lg); code != 200 || len(lg.Lines) != 1 || !strings.Contains(lg.Lines[0], "serving") {
		t.Errorf("logs for the operator: %d %+v", code, lg)
	}
	if code := do(bob, "GET", "/v1/logs", "", &perr); code != 403 || !strings.Contains(perr.Error.Hint, "--operator bob") {
		t.Errorf("logs for another user: %d %+v", code, perr)
	}

	// The runtime's profiles: for the operator, in pprof's format or as
	// text; refused to others; a name that is no profile is a clear 400.
	raw := func(c access.Caller, path string) (int, string) {
		r := httptest.NewRequest("GET", "http://local.runos"+path, nil)
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code, rec.Body.String()
	}
	if code, body := raw(alice, "/v1/debug/pprof/heap?gc=1"); code != 200 || !strings.HasPrefix(body, "\x1f\x8b") {
		t.Errorf("heap profile for the operator: %d, %d bytes (want gzipped pprof)", code, len(body))
	}
	if code, body := raw(alice, "/v1/debug/pprof/goroutine?debug=1"); code != 200 || !strings.HasPrefix(body, "goroutine profile: total") {
		t.Errorf("goroutines as text: %d %.60q", code, body)
	}
	if code, body := raw(bob, "/v1/debug/pprof/heap"); code != 403 || !strings.Contains(body, "--operator bob") {
		t.Errorf("a profile for another user: %d %s", code, body)
	}
	if code, body := raw(alice, "/v1/debug/pprof/nosuch"); code != 400 || !strings.Contains(body, `no profile \"nosuch\"`) || !strings.Contains(body, "heap") {
		t.Errorf("an unknown profile: %d %s", code, body)
	}
	if code, body := raw(alice, "/v1/debug/pprof/heap?debug=x"); code != 400 || !strings.Contains(body, "debug=") {
		t.Errorf("a bad debug value: %d %s", code, body)
	}
}

func clusterOf(st *localapi.Status, cid string) (localapi.ClusterStatus, bool) {
	for _, c := range st.Clusters {
		if c.CID == cid {
			return c, true
		}
	}
	return localapi.ClusterStatus{}, false
}
