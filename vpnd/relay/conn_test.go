package relay

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/internal/relaywire"
)

// TestRelayOnlyOnTheNode: the daemon dials a relay only on its cluster's
// VPN node (the endpoint's address, or a name resolving to it), shows it
// a relay ticket and never an Authorization header, and refuses a relay
// anywhere else before sending it anything.
func TestRelayOnlyOnTheNode(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		http.Error(w, "not a relay", http.StatusTeapot)
	}))
	defer srv.Close()
	k, _ := wgtypes.GeneratePrivateKey()
	b := New(Config{Inner: conn.NewStdNetBind(), Log: slog.New(slog.DiscardHandler), Key: k.PublicKey(),
		TLS: func() (*tls.Config, error) {
			// The test certificate names example.com (and 127.0.0.1).
			c := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
			c.ServerName = "example.com"
			return c, nil
		}})
	defer b.Stop()
	port := netip.MustParseAddrPort(strings.TrimPrefix(srv.URL, "https://")).Port()
	ctx := context.Background()

	// Another host: an IP literal that is not the node, a name that is not
	// the node's.
	for _, to := range []Dest{
		{CID: "ky3", Endpoint: netip.MustParseAddrPort("127.0.0.2:32768"), RelayURL: srv.URL + relaywire.Path},
		{CID: "ky3", Endpoint: netip.MustParseAddrPort("192.0.2.7:32768"), RelayURL: "https://localhost:" + itoa(port) + relaywire.Path},
	} {
		_, err := b.dialWebSocket(ctx, to, "rt1.ticket")
		if err == nil || !strings.Contains(err.Error(), "not the VPN node's address") || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("relay %s for node %s: %v, want refused", to.RelayURL, to.Endpoint, err)
		}
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Fatalf("a relay on another host was sent %d requests", len(seen))
	}
	mu.Unlock()

	// The node's address, and a name resolving to it: dialed, with the
	// ticket and no session.
	for _, url := range []string{srv.URL + relaywire.Path, "https://localhost:" + itoa(port) + relaywire.Path} {
		_, err := b.dialWebSocket(ctx, Dest{CID: "ky3", Endpoint: netip.MustParseAddrPort("127.0.0.1:32768"), RelayURL: url}, "rt1.ticket")
		if err == nil || !strings.Contains(err.Error(), "418") {
			t.Fatalf("relay %s on the node: %v, want the test server's 418", url, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("the relay on the node got %d requests, want 2", len(seen))
	}
	for _, h := range seen {
		if h.Get(relaywire.HeaderTicket) != "rt1.ticket" || h.Get("Authorization") != "" {
			t.Fatalf("the relay was sent ticket %q and Authorization %q", h.Get(relaywire.HeaderTicket), h.Get("Authorization"))
		}
	}
}

func itoa(p uint16) string {
	return strings.TrimPrefix(netip.AddrPortFrom(netip.IPv4Unspecified(), p).String(), "0.0.0.0:")
}
