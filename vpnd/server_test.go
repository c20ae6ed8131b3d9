package vpnd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
)

func TestParseRequests(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"apiUrl":"https://198.51.100.10","accessToken":"abc","expiresAt":"2030-01-01T00:00:00Z"}`, true},
		{`{"apiUrl":"https://198.51.100.10/","accessToken":"abc"}`, true},
		{`{"apiUrl":"https://127.0.0.1:8080","accessToken":"abc","extra":1}`, true},
		{`{"apiUrl":"http://127.0.0.1:8080","accessToken":"abc"}`, false}, // the token would go in clear text
		{`{"apiUrl":"ftp://x","accessToken":"abc"}`, false},
		{`{"apiUrl":"https://u:p@x","accessToken":"abc"}`, false},
		{`{"apiUrl":"https://x/v1","accessToken":"abc"}`, false},
		{`{"apiUrl":"https://x?a=b","accessToken":"abc"}`, false},
		{`{"apiUrl":"https://x"}`, false},
		{`{"apiUrl":"https://x","accessToken":"a b"}`, false},
		{`{"apiUrl":"https://x","accessToken":"a\r\nX-Evil: 1"}`, false},
		{`null`, false},
	} {
		_, err := parseSessionRequest(bytes.NewReader([]byte(tc.body)), false)
		if (err == nil) != tc.ok {
			t.Errorf("session %s: err %v", tc.body, err)
		}
	}
	if r, err := parseSessionRequest(strings.NewReader(`{"apiUrl":"https://x/","accessToken":"t"}`), false); err != nil || r.APIURL != "https://x" {
		t.Errorf("trailing slash: %+v %v", r, err)
	}
	// Plain HTTP only from a daemon started with --insecure-http.
	plain := `{"apiUrl":"http://127.0.0.1:8080","accessToken":"abc"}`
	if _, err := parseSessionRequest(strings.NewReader(plain), false); err == nil || !strings.Contains(err.Error(), "--insecure-http") {
		t.Errorf("plain HTTP without the flag: %v", err)
	}
	if r, err := parseSessionRequest(strings.NewReader(plain), true); err != nil || r.APIURL != "http://127.0.0.1:8080" {
		t.Errorf("plain HTTP with the flag: %+v %v", r, err)
	}
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"cid":"ky3"}`, true},
		{`{"cid":"abcdefghijklmnop"}`, true},
		{`{"cid":"ky"}`, false},
		{`{"cid":"abcdefghijklmnopq"}`, false},
		{`{"cid":"ky3/../x"}`, false},
		{`{"cid":"KY3"}`, false},
		{`{}`, false},
	} {
		_, err := parseConnectRequest(strings.NewReader(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("connect %s: err %v", tc.body, err)
		}
	}
}

func FuzzParseSessionRequest(f *testing.F) {
	f.Add([]byte(`{"apiUrl":"https://198.51.100.10","accessToken":"abc","expiresAt":"2030-01-01T00:00:00Z","user":"a@b"}`))
	f.Add([]byte(`{"apiUrl":"http://[::1]:8080/","accessToken":"x"} `))
	f.Add([]byte(`{"apiUrl":"https://x","accessToken":"a","expiresAt":"bad"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseSessionRequest(bytes.NewReader(b), false)
		if err != nil {
			return
		}
		if !strings.HasPrefix(r.APIURL, "https://") {
			t.Fatalf("accepted a control URL that is not https: %q", r.APIURL)
		}
		if r.AccessToken == "" || strings.ContainsAny(r.AccessToken, " \r\n\t") || strings.HasSuffix(r.APIURL, "/") {
			t.Fatalf("accepted %+v", r)
		}
		if _, err := api.NewClient(r.APIURL, r.AccessToken, ""); err != nil {
			t.Fatalf("accepted an api URL the client refuses: %q: %v", r.APIURL, err)
		}
		if _, err := http.NewRequest("GET", r.APIURL+"/v1/me", nil); err != nil {
			t.Fatalf("accepted %q: %v", r.APIURL, err)
		}
	})
}

func FuzzParseConnectRequest(f *testing.F) {
	f.Add([]byte(`{"cid":"ky3"}`))
	f.Add([]byte(`{"cid":"ky3","x":[1,2]}`))
	f.Add([]byte(`{"cid":"\u006by3"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseConnectRequest(bytes.NewReader(b))
		if err != nil {
			return
		}
		if api.CheckCID(r.CID) != nil {
			t.Fatalf("accepted cid %q", r.CID)
		}
	})
}

// TestStatusAccessField: the server stamps each answer with the access of
// the caller it came from (here injected as the connection's identity; the
// SO_PEERCRED test runs real callers), and a connection the kernel said
// nothing about may only read.
func TestStatusAccessField(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	pol := access.Policy{
		Operator: func() (*access.Operator, error) { return &access.Operator{UID: 1000, User: "alice"}, nil },
		UserName: func(uid int) string { return map[int]string{1000: "alice", 1001: "bob"}[uid] },
	}
	h := (&server{d: td.daemon, policy: pol}).handler()
	do := func(c *access.Caller, method, path, body string) (int, localapi.Status) {
		r := httptest.NewRequest(method, "http://local.runos"+path, strings.NewReader(body))
		if c != nil {
			r = r.WithContext(context.WithValue(r.Context(), callerKey{}, *c))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var st localapi.Status
		_ = json.Unmarshal(rec.Body.Bytes(), &st)
		return rec.Code, st
	}
	root := &access.Caller{Cred: platform.PeerCred{UID: 0, Admin: true}}
	alice := &access.Caller{Cred: platform.PeerCred{UID: 1000, GID: 1000}}
	bob := &access.Caller{Cred: platform.PeerCred{UID: 1001, GID: 1001}}
	for _, tc := range []struct {
		name    string
		caller  *access.Caller
		control bool
		hint    string
	}{
		{"root", root, true, ""},
		{"operator", alice, true, ""},
		{"other user", bob, false, "ask an administrator to run: sudo runos vpn install --operator bob"},
		{"no credentials", nil, false, "ask an administrator to run: sudo runos vpn install --operator $USER"},
	} {
		code, st := do(tc.caller, "GET", "/v1/status", "")
		if code != 200 || st.Access == nil || st.Access.Control != tc.control || st.Access.Hint != tc.hint || st.Access.Reason == "" {
			t.Errorf("%s: %d access %+v", tc.name, code, st.Access)
		}
	}
	// An action's answer is a status too, with the same field.
	code, st := do(alice, "POST", "/v1/session", `{"apiUrl":"`+w.url+`","accessToken":"tok1"}`)
	if code != 200 || st.Session.State != localapi.SessionSignedIn || st.Access == nil || !st.Access.Control ||
		!strings.Contains(st.Access.Reason, "alice (uid 1000) is the operator recorded at install") {
		t.Errorf("session as the operator: %d %+v", code, st.Access)
	}
	// The daemon's own status carries no caller's access.
	if td.Status().Access != nil {
		t.Error("the derived status carries an access")
	}
}

// TestChangeOfControl: a member of the runos group may steer the daemon
// but not point it at another control server (which could then push routes
// and DNS to it); root and the operator recorded at install may. The
// status names the control the daemon follows, also after sign-out.
func TestChangeOfControl(t *testing.T) {
	w := newWorld(t)
	for _, tok := range []string{"tok-carol", "tok-root", "tok-carol2", "tok-alice"} {
		w.fc.AddSession(tok, "alice@example.com", time.Hour)
	}
	td := startDaemon(t, w, t.TempDir())
	pol := access.Policy{
		Operator: func() (*access.Operator, error) { return &access.Operator{UID: 1000, User: "alice"}, nil },
		InGroup:  func(uid, _ int, g string) bool { return uid == 1002 && g == access.Group },
		UserName: func(uid int) string { return map[int]string{1000: "alice", 1002: "carol"}[uid] },
	}
	h := (&server{d: td.daemon, policy: pol}).handler()
	do := func(c access.Caller, method, path, body string) (int, []byte) {
		r := httptest.NewRequest(method, "http://local.runos"+path, strings.NewReader(body))
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code, rec.Body.Bytes()
	}
	session := func(url, tok string) string { return `{"apiUrl":"` + url + `","accessToken":"` + tok + `"}` }
	root := access.Caller{Cred: platform.PeerCred{UID: 0, Admin: true}}
	alice := access.Caller{Cred: platform.PeerCred{UID: 1000, GID: 1000}}
	carol := access.Caller{Cred: platform.PeerCred{UID: 1002, GID: 1002}}
	me := func() int { return w.fc.Calls("GET /v1/me") }

	// Nothing followed yet: a group member may not choose the control.
	code, body := do(carol, "POST", "/v1/session", session(w.url, "tok-carol"))
	if code != 403 || !strings.Contains(string(body), "choosing the control server this daemon follows") || me() != 0 {
		t.Fatalf("carol's first session: %d %s (control asked %d times)", code, body, me())
	}
	if code, body = do(root, "POST", "/v1/session", session(w.url, "tok-root")); code != 200 {
		t.Fatalf("root's session: %d %s", code, body)
	}
	if st := td.Status(); st.Control != w.url {
		t.Fatalf("status control = %q, want %q", st.Control, w.url)
	}
	// The same control: fine for the group's members.
	if code, body = do(carol, "POST", "/v1/session", session(w.url, "tok-carol2")); code != 200 {
		t.Fatalf("carol's session with the same control: %d %s", code, body)
	}
	// Another control: refused before the token goes anywhere.
	other := w.secondURL(t)
	before := me()
	code, body = do(carol, "POST", "/v1/session", session(other, "tok-carol2"))
	if code != 403 || !strings.Contains(string(body), "from "+w.url+" to "+other) || me() != before {
		t.Fatalf("carol moving the daemon to %s: %d %s", other, code, body)
	}
	// Signed out, the daemon still follows its control.
	if code, body = do(carol, "DELETE", "/v1/session", ""); code != 200 {
		t.Fatalf("down: %d %s", code, body)
	}
	if st := td.Status(); st.Control != w.url || st.Session.State != localapi.SessionSignedOut {
		t.Fatalf("after down: control %q, session %s", st.Control, st.Session.State)
	}
	if code, _ = do(carol, "POST", "/v1/session", session(other, "tok-carol2")); code != 403 {
		t.Fatalf("carol after sign-out: %d", code)
	}
	// The operator may.
	if code, body = do(alice, "POST", "/v1/session", session(other, "tok-alice")); code != 200 {
		t.Fatalf("the operator's session with another control: %d %s", code, body)
	}
	if st := td.Status(); st.Control != other || st.Session.APIURL != other {
		t.Fatalf("status after the operator's change: control %q, session %q", st.Control, st.Session.APIURL)
	}
	// Each caller's status says whether it may.
	var st localapi.Status
	_, body = do(carol, "GET", "/v1/status", "")
	if json.Unmarshal(body, &st) != nil || st.Access == nil || !st.Access.Control || st.Access.ChangeControl {
		t.Fatalf("carol's access: %s", body)
	}
	_, body = do(alice, "GET", "/v1/status", "")
	if json.Unmarshal(body, &st) != nil || st.Access == nil || !st.Access.ChangeControl {
		t.Fatalf("alice's access: %s", body)
	}
}
