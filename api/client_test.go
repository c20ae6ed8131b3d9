package api

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// The client's requests may use HTTP/2; its streams use HTTP/1.1, also
// against a control that offers HTTP/2 (docs/performance.md says why).
func TestStreamsUseHTTP1(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Proto", r.Proto)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600)
	c, err := NewClient(ts.URL, "tok", ca)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		hc   *http.Client
		want string
	}{{c.HTTP, "HTTP/2.0"}, {c.StreamHTTP, "HTTP/1.1"}, {c.HTTP, "HTTP/2.0"}, {c.StreamHTTP, "HTTP/1.1"}} {
		resp, err := tc.hc.Get(ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Proto"); got != tc.want {
			t.Errorf("proto %s, want %s", got, tc.want)
		}
	}
}
