package relay

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/relaywire"
)

func testServer(t *testing.T, serving bool, tune ...func(*Server)) (*httptest.Server, *Bind, wgtypes.Key) {
	t.Helper()
	k, _ := wgtypes.GeneratePrivateKey()
	good := k.PublicKey()
	b := NewBind(conn.NewStdNetBind(), slog.New(slog.DiscardHandler))
	rs := &Server{Bind: b, Log: slog.New(slog.DiscardHandler), Serving: func() bool { return serving },
		Check: func(_ context.Context, token string, key wgtypes.Key) (string, error) {
			switch {
			case token == "down":
				return "", errors.New("control unreachable")
			case token != "tok":
				return "", &api.Error{Status: 403, Code: api.CodeSessionExpired, Message: "your sign-in expired at 2026-07-01T12:00:00Z"}
			case key != good:
				return "", &api.Error{Status: 403, Code: api.CodeForbidden, Message: "this public key is not the device of this sign-in"}
			}
			return "dev-1", nil
		}}
	for _, f := range tune {
		f(rs)
	}
	srv := httptest.NewTLSServer(rs)
	t.Cleanup(srv.Close)
	return srv, b, good
}

func dial(srv *httptest.Server, path, ticket, key string) (*websocket.Conn, *http.Response, error) {
	hdr := http.Header{}
	if strings.HasPrefix(ticket, "Bearer ") {
		hdr.Set("Authorization", ticket) // what a daemon before tickets sent
	} else if ticket != "" {
		hdr.Set(relaywire.HeaderTicket, ticket)
	}
	hdr.Set(relaywire.HeaderDeviceKey, key)
	return websocket.Dial(context.Background(), srv.URL+path, &websocket.DialOptions{
		HTTPClient: srv.Client(), HTTPHeader: hdr, Subprotocols: []string{relaywire.Subprotocol}})
}

func TestRelayRefusals(t *testing.T) {
	srv, b, key := testServer(t, true)
	for name, tc := range map[string]struct {
		path, token, key string
		status           int
		code             string
	}{
		"other path":      {"/", "tok", key.String(), 404, api.CodeNotFound},
		"no ticket":       {relaywire.Path, "", key.String(), 401, api.CodeUnauthorized},
		"a session token": {relaywire.Path, "Bearer tok", key.String(), 400, api.CodeInvalid},
		"bad key":         {relaywire.Path, "tok", "nonsense", 400, api.CodeInvalid},
		"expired session": {relaywire.Path, "old", key.String(), 403, api.CodeSessionExpired},
		"another's key":   {relaywire.Path, "tok", wgtypes.Key{1}.String(), 403, api.CodeForbidden},
		"control is down": {relaywire.Path, "down", key.String(), 502, api.CodeUnavailable},
	} {
		c, resp, err := dial(srv, tc.path, tc.token, tc.key)
		if err == nil {
			c.CloseNow()
			t.Errorf("%s: upgraded", name)
			continue
		}
		var eb api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		if resp.StatusCode != tc.status || eb.Error == nil || eb.Error.Code != tc.code {
			t.Errorf("%s: %d %+v, want %d %s", name, resp.StatusCode, eb.Error, tc.status, tc.code)
		}
	}
	if b.Streams() != 0 {
		t.Errorf("%d streams after refusals", b.Streams())
	}
	notServing, _, key2 := testServer(t, false)
	if _, resp, err := dial(notServing, relaywire.Path, "tok", key2.String()); err == nil || resp.StatusCode != 503 {
		t.Errorf("not serving: %v", err)
	}
}

func TestRelayStreamsFollowThePeers(t *testing.T) {
	srv, b, key := testServer(t, true)
	c, _, err := dial(srv, relaywire.Path, "tok", key.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	deadline := time.Now().Add(5 * time.Second)
	for b.Streams() != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // attach happens in the handler, after the upgrade answered
	}
	if b.Streams() != 1 {
		t.Fatalf("%d streams", b.Streams())
	}
	if other, _ := wgtypes.GeneratePrivateKey(); !b.Relayed(key) || b.Relayed(other.PublicKey()) {
		t.Fatal("Relayed does not tell the device on a stream from another")
	}
	b.KeepOnly(map[wgtypes.Key]bool{key: true})
	if b.Streams() != 1 {
		t.Fatal("a peer's stream was closed")
	}
	b.KeepOnly(map[wgtypes.Key]bool{}) // the device is no longer a peer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := c.Read(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("the stream of a removed peer stays open: %v", err)
	}
	if !strings.Contains(srv.URL, "https://") {
		t.Fatal("the relay is not TLS")
	}
}

// TestRelayStreamsPerAddress: one device address holds at most MaxPerAddr
// streams; the next is answered 429 before control is asked.
func TestRelayStreamsPerAddress(t *testing.T) {
	var asked atomic.Int32
	srv, b, key := testServer(t, true, func(s *Server) {
		s.MaxPerAddr = 2
		check := s.Check
		s.Check = func(ctx context.Context, tk string, k wgtypes.Key) (string, error) {
			asked.Add(1)
			return check(ctx, tk, k)
		}
	})
	for range 2 {
		c, _, err := dial(srv, relaywire.Path, "tok", key.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Streams() != 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // attach happens in the handler, after the upgrade answered
	}
	if _, resp, err := dial(srv, relaywire.Path, "tok", key.String()); err == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third stream from one address: %v", err)
	}
	if n := asked.Load(); n != 2 {
		t.Fatalf("control was asked %d times, want 2 (not for the refused one)", n)
	}
}
