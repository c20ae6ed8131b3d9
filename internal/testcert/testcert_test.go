package testcert

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestClientTrustsTheServerAndOnlyIt: a server with the certificate is
// reached by its client, and not by a client of another certificate.
func TestClientTrustsTheServerAndOnlyIt(t *testing.T) {
	c := New(t)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{c.TLS(t)}}
	ts.StartTLS()
	defer ts.Close()
	resp, err := c.Client().Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := New(t).Client().Get(ts.URL); err == nil {
		t.Fatal("a client of another certificate trusted this one")
	}
}
