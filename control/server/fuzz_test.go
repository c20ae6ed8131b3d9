package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/runos/vpn/api"
)

// FuzzRequestBodies sends arbitrary bodies to every route that reads one.
// Whatever comes in, control answers without a 5xx, and an answer of 4xx
// has changed nothing.
func FuzzRequestBodies(f *testing.F) {
	e := newEnv(f, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) })
	ctx := context.Background()
	tok, _, err := e.srv.CreateSession(ctx, "ada@example.com", api.ClientCLI, "")
	if err != nil {
		f.Fatal(err)
	}
	routes := []struct{ method, path, token string }{
		{http.MethodPost, "/v1/devices", tok},
		{http.MethodPut, "/v1/clusters/ky3/nodes/n2/ingress", opToken},
		{http.MethodPost, "/v1/clusters/abc/services/wireguard", opToken},
		{http.MethodPost, "/v1/clusters/ky3/services/wireguard/wg-ky3/move-plan", opToken},
		{http.MethodPost, "/v1/clusters/ky3/services/wireguard/wg-ky3/moves", opToken},
		{http.MethodPost, "/v1/gateway/report", enroll("ky3", "n2")},
		{http.MethodPut, "/v1/accounts/rjwrn/policy", opToken},
		{http.MethodPost, "/v1/accounts/rjwrn/policy/test", opToken},
		{http.MethodPost, "/v1/accounts/rjwrn/groups", opToken},
		{http.MethodPost, "/v1/accounts/rjwrn/groups/oncall/members", opToken},
	}
	k := newKey(f).PublicKey().String()
	f.Add(uint8(0), `{"publicKey":"`+k+`","name":"laptop","os":"linux"}`)
	f.Add(uint8(0), `{"publicKey":"`+k+`","privateKey":"`+k+`"}`)
	f.Add(uint8(1), `{"ingressIp":"10.77.0.22","published":false}`)
	f.Add(uint8(1), `{"ingressIp":"::ffff:1.2.3.4"}`)
	f.Add(uint8(2), `{"name":"wg","targetNodeId":"n1","port":65535}`)
	f.Add(uint8(3), `{"targetNodeId":"n2"}`)
	f.Add(uint8(4), `{"targetNodeId":"n3"}`)
	f.Add(uint8(5), `{"publicKey":"`+k+`","serviceId":"wg-ky3","listening":true,"mapVersion":99,"handshakes":[{"publicKey":"`+k+`","at":"2026-03-01T12:00:00Z"}]}`)
	f.Add(uint8(5), `{"listenPort":-1}`)
	f.Add(uint8(6), `{"document":"version 3\ngroup oncall: ada@example.com\nallow group:oncall -> ky3: 10.96.0.0/16:80-443/tcp\n"}`)
	f.Add(uint8(6), `{"document":"version 1\nallow group:nope -> zzz: 10.96.0.300\n"}`)
	f.Add(uint8(7), `{"user":"bob@example.com","to":"ky3:10.96.0.20:5432/udp"}`)
	f.Add(uint8(8), `{"name":"oncall"}`)
	f.Add(uint8(9), `{"email":"Bob@Example.com"}`)
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		r := routes[int(route)%len(routes)]
		before := e.version()
		req := httptest.NewRequest(r.method, r.path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+r.token)
		rec := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", r.method, r.path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && e.version() != before {
			t.Fatalf("%s %s %q: refused with %d but changed the store", r.method, r.path, body, rec.Code)
		}
	})
}

func FuzzPollParams(f *testing.F) {
	f.Add("since=5&wait=10")
	f.Add("since=-1")
	f.Add("wait=99999999999999999999")
	f.Fuzz(func(t *testing.T, q string) {
		req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/v1/x", RawQuery: q}}
		_, wait, e := pollParams(req)
		if e == nil && (wait < 0 || wait > maxWait) {
			t.Fatalf("%q: wait %s", q, wait)
		}
	})
}
