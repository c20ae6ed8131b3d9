package vpnd

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/runos/vpn/api"
)

func TestControlClientsShareOneTransport(t *testing.T) {
	dials := 0
	c := &controlClients{dial: func(apiURL string) (*api.Client, error) {
		dials++
		if apiURL == "https://bad" {
			return nil, errors.New("no")
		}
		return api.NewClient(apiURL, "", "")
	}}
	a, err := c.client("https://a.example", "t1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.client("https://a.example", "t2")
	if a.HTTP != b.HTTP || a.StreamHTTP != b.StreamHTTP || dials != 1 {
		t.Fatalf("same control: want one transport and one dial, got %d dials", dials)
	}
	if a.Token != "t1" || b.Token != "t2" {
		t.Fatalf("tokens %q %q: each client sends its own", a.Token, b.Token)
	}
	if _, err := c.client("https://bad", "t3"); err == nil {
		t.Fatal("a URL that cannot be dialed gave a client")
	}
	if again, _ := c.client("https://a.example", "t1"); again.HTTP != a.HTTP || dials != 2 {
		t.Fatalf("a failed dial replaced the last control's client (%d dials)", dials)
	}
	other, _ := c.client("https://b.example", "t1")
	if other.HTTP == a.HTTP || other.BaseURL != "https://b.example" {
		t.Fatal("another control got the first one's client")
	}
}

// TestControlClientsOneConnection is the leak that was: a client per
// disconnect each kept a connection to control open. Through shared
// clients, 50 requests with fresh clients ride one connection.
func TestControlClientsOneConnection(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"user":"u@example.com","expiresAt":"2099-01-01T00:00:00Z"}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &controlClients{dial: func(apiURL string) (*api.Client, error) { return api.NewClient(apiURL, "", ca) }}
	for i := range 50 {
		cl, err := c.client(srv.URL, "token")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Me(context.Background()); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("50 requests through fresh clients opened %d connections to control, want 1", n)
	}
}
