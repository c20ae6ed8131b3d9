package control

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunServesMetrics runs control with --metrics-addr: an API request
// made on control's address shows on /metrics under its route, and the
// store's transactions it made are timed (the API is given the measured
// store).
func TestRunServesMetrics(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, client := certFor(t, dir)
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := run(t, Config{DB: filepath.Join(dir, "c.db"), TLSCert: certFile, TLSKey: keyFile, Seed: world(t, dir), MetricsListener: mln})

	req, _ := http.NewRequest("GET", u+"/v1/clusters", nil)
	req.Header.Set("Authorization", "Bearer operator-token-0123456789")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/clusters: %s", res.Status)
	}

	res, err = http.Get("http://" + mln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var route, tx bool
	for _, line := range strings.Split(string(b), "\n") {
		route = route || strings.HasPrefix(line, "runos_control_http_requests_total{") && strings.Contains(line, "/v1/clusters")
		tx = tx || strings.HasPrefix(line, `runos_control_store_transaction_seconds_count{kind="view"}`) && !strings.HasSuffix(line, " 0")
	}
	if !route || !tx {
		t.Errorf("/metrics: the request's route counted %v, a store view timed %v:\n%s", route, tx, b)
	}
}

// TestRunGatesHandshakes: control's HTTPS listener runs its handshakes
// through control/tlsgate and still negotiates HTTP/2 with a client that
// offers it (net/http reads the gate's tls.Conn's protocol) and HTTP/1.1
// with one that does not; /metrics counts the handshakes done.
func TestRunGatesHandshakes(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, client := certFor(t, dir)
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := run(t, Config{DB: filepath.Join(dir, "c.db"), TLSCert: certFile, TLSKey: keyFile, Seed: world(t, dir), MetricsListener: mln})
	base := client.Transport.(*http.Transport)
	for _, c := range []struct {
		h2   bool
		want string
	}{{true, "HTTP/2.0"}, {false, "HTTP/1.1"}} {
		tr := &http.Transport{TLSClientConfig: base.TLSClientConfig.Clone(), ForceAttemptHTTP2: c.h2}
		if !c.h2 {
			tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		}
		res, err := (&http.Client{Transport: tr}).Get(u + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		tr.CloseIdleConnections()
		if res.StatusCode != http.StatusOK || res.Proto != c.want {
			t.Errorf("GET /healthz offering h2 %v: %s over %s, want 200 over %s", c.h2, res.Status, res.Proto, c.want)
		}
	}
	res, err := http.Get("http://" + mln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(b), "\n"+`runos_control_tls_handshakes_total{outcome="done"} 2`+"\n") {
		t.Errorf("/metrics: want the gate's 2 handshakes done (one per client above):\n%s", b)
	}
}
