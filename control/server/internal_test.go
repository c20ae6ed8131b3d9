package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/reqid"
	"github.com/runos/vpn/internal/syncbuf"
)

// TestInternalErrorsShowOnlyARequestID: when control itself fails (here
// its database is gone), the caller, signed in or not, is told a request
// id and no internal text; the log has the text under that id.
func TestInternalErrorsShowOnlyARequestID(t *testing.T) {
	var logs syncbuf.Buffer
	e := newEnv(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	user := e.signIn("ada@example.com")
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, tok, method, path string }{
		{"operator", opToken, "GET", "/v1/clusters"},
		{"signed in", user.Token, "GET", "/v1/me"},
		{"unknown token", "nobody-knows-this-token", "GET", "/v1/clusters"},
		{"gateway", enroll("ky3", "n1"), "GET", "/v1/gateway/map"},
	} {
		req, _ := http.NewRequest(tc.method, e.ts.URL+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+tc.tok)
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		id := resp.Header.Get(reqid.Header)
		var eb api.ErrorBody
		if err := json.Unmarshal(body, &eb); err != nil || eb.Error == nil || resp.StatusCode != 500 || id == "" {
			t.Fatalf("%s: %d %s (id %q)", tc.name, resp.StatusCode, body, id)
		}
		if eb.Error.Message != "internal error (request "+id+")" || !strings.Contains(eb.Error.Hint, id) {
			t.Errorf("%s: answer %+v, want the request id %s alone", tc.name, eb.Error, id)
		}
		for _, leak := range []string{"closed", "sql", "sqlite", "authenticate"} {
			if strings.Contains(strings.ToLower(string(body)), leak) {
				t.Errorf("%s: the answer tells %q: %s", tc.name, leak, body)
			}
		}
		if l := logs.String(); !strings.Contains(l, "requestId="+id) || !strings.Contains(l, "closed") {
			t.Errorf("%s: the log lacks the request id %s with the error:\n%s", tc.name, id, l)
		}
	}
}
