package vpnd

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
)

// rawDo sends one request over the socket with full control of the headers.
func rawDo(t *testing.T, sock, method, path, host string, body string, hdr map[string]string) (int, api.ErrorBody) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequest(method, "http://"+host+path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb api.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp.StatusCode, eb
}

func TestLocalAPIOverSocket(t *testing.T) {
	netnstest.Require(t) // root: changing state over the socket needs root as the caller (SO_PEERCRED)
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	dir := t.TempDir()
	td := startDaemon(t, w, dir)
	sock := serve(t, td.daemon, dir, access.SystemPolicy(dir))
	c := localapi.NewClient(sock)
	ctx := context.Background()

	// The watch stream: the current status first, then one per change.
	seen := make(chan localapi.Status, 64)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go c.Watch(wctx, func(st *localapi.Status) bool { seen <- *st; return true })
	first := <-seen
	if first.Session.State != localapi.SessionSignedOut {
		t.Fatalf("first watched status %+v", first.Session)
	}

	if _, err := c.Connect(ctx, "ky3"); !api.IsCode(err, localapi.CodeSignedOut) || !strings.Contains(err.Error(), "not signed in: run `runos vpn up`") {
		t.Fatalf("connect signed out: %v", err)
	}
	if _, err := c.SetSession(ctx, localapi.SessionRequest{APIURL: w.url, AccessToken: "wrong"}); !api.IsCode(err, api.CodeUnauthorized) {
		t.Fatalf("a bad token: %v", err)
	}
	if st, _ := c.Status(ctx); st.Session.State != localapi.SessionSignedOut {
		t.Fatalf("a refused session changed the state: %+v", st.Session)
	}
	st, err := c.SetSession(ctx, localapi.SessionRequest{APIURL: w.url, AccessToken: "tok1"})
	if err != nil || st.Session.State != localapi.SessionSignedIn {
		t.Fatalf("SetSession: %v %+v", err, st)
	}
	if _, err := c.Connect(ctx, "Ky3!"); !api.IsCode(err, localapi.CodeInvalid) || !strings.Contains(err.Error(), "3 to 16 lowercase letters and digits") {
		t.Fatalf("bad cid: %v", err)
	}
	st, err = c.Connect(ctx, "ky3")
	if err != nil {
		t.Fatal(err)
	}
	if c := cluster(*st, "ky3"); !c.Wanted || c.State == localapi.ClusterDisconnected {
		t.Errorf("after connect: %+v", c)
	}
	for deadline := time.After(10 * time.Second); ; {
		select {
		case s := <-seen:
			if cluster(s, "ky3").PeerUp {
				goto up
			}
		case <-deadline:
			t.Fatal("watch never showed ky3 peerUp")
		}
	}
up:
	st, err = c.Disconnect(ctx, "ky3")
	if err != nil || cluster(*st, "ky3").State != localapi.ClusterDisconnected {
		t.Fatalf("disconnect: %v %+v", err, st)
	}
	if v, err := c.Version(ctx); err != nil || v.Version == "" {
		t.Errorf("version: %v %v", v, err)
	}
	st, err = c.EndSession(ctx)
	if err != nil || st.Session.State != localapi.SessionSignedOut {
		t.Fatalf("down: %v %+v", err, st)
	}

	// Web pages and other hosts are refused, whoever asks.
	for _, tc := range []struct {
		name, method, host string
		hdr                map[string]string
	}{
		{"origin", "GET", "local.runos", map[string]string{"Origin": "https://evil.example"}},
		{"referer", "POST", "local.runos", map[string]string{"Referer": "https://evil.example/"}},
		{"host", "GET", "evil.example", nil},
	} {
		if code, eb := rawDo(t, sock, tc.method, "/v1/status", tc.host, "", tc.hdr); code != 403 || eb.Error == nil || eb.Error.Code != "forbidden" {
			t.Errorf("%s: %d %+v", tc.name, code, eb.Error)
		}
	}
	// Bad bodies: a clear error, no change.
	for _, body := range []string{"", "{", `{"cid":"ky3"} {"cid":"xym"}`, `{"cid":3}`, `[]`} {
		code, eb := rawDo(t, sock, "POST", "/v1/connect", "local.runos", body, nil)
		if code != 400 || eb.Error == nil || eb.Error.Code != localapi.CodeInvalid {
			t.Errorf("body %q: %d %+v", body, code, eb.Error)
		}
	}
	big := `{"apiUrl":"https://x","accessToken":"` + strings.Repeat("a", maxBody) + `"}`
	if code, eb := rawDo(t, sock, "POST", "/v1/session", "local.runos", big, nil); code != 400 || !strings.Contains(eb.Error.Message, "over") {
		t.Errorf("huge body: %d %+v", code, eb.Error)
	}
	if code, eb := rawDo(t, sock, "GET", "/v1/nope", "local.runos", "", nil); code != 404 || eb.Error == nil || eb.Error.Code != localapi.CodeNotFound {
		t.Errorf("unknown route: %d %+v", code, eb.Error)
	}
}
