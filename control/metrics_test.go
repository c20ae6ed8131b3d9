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
