package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// A gateway's report is the one body that grows with the devices: one
// with a handshake for each of 60,000 devices (over 5 MB, past every other
// body's 4 MiB) is taken; any other body that large is refused.
func TestLargeGatewayReportTaken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hs := make([]api.PeerHandshake, 60000)
	key := make([]byte, 32)
	for i := range hs {
		rand.Read(key)
		hs[i] = api.PeerHandshake{PublicKey: base64.StdEncoding.EncodeToString(key), At: time.Now().UTC()}
	}
	if err := e.gateway("ky3", "n1").GatewayReport(ctx, api.GatewayReport{Version: "test", Handshakes: hs}); err != nil {
		t.Fatalf("a report with 60,000 handshakes: %v", err)
	}
	big := `{"name":"` + strings.Repeat("x", maxBody) + `"}`
	if status, code := e.raw(e.signIn("bob@example.com").Token, http.MethodPost, "/v1/devices", big); status != http.StatusBadRequest {
		t.Fatalf("a 4 MiB device registration: %d %s, want 400", status, code)
	}
}
