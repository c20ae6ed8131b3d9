package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/tlsgate"
)

type fakeStats struct{ err error }

func (f fakeStats) Stats(context.Context, time.Time) (store.Stats, error) {
	return store.Stats{LiveSessions: 3, Devices: map[string]int{store.DeviceConnected: 2, store.DeviceSignedOut: 1}}, f.err
}

// TestControlMetrics: requests are labelled by route pattern (never the
// path with its ids), and every family moves by exactly what it is told.
func TestControlMetrics(t *testing.T) {
	m := New(fakeStats{}, time.Now)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/devices/{id}/map", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	mux.HandleFunc("GET /v1/me", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	h := m.Wrap(mux)
	for _, p := range []string{"/v1/devices/d-secret-id/map", "/v1/me", "/v1/me", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	done := m.PollHeld("device_map")
	m.PollHeld("gateway_map")
	done()
	m.StreamHeld("device_map")
	m.StreamHeld("device_map")
	m.StreamHeld("gateway_map")()
	m.StreamDropped("device_map", "slow")
	m.FanOut(20 * time.Millisecond)
	m.MoveFinished("done", 40, true)
	m.MoveFinished("failed", 0, false)
	m.JoinAcked("timeout")
	m.SignedIn("authorization_code")
	m.Refused("wrong_password")
	m.Refused("wrong_password")

	want := `
# HELP runos_control_http_requests_total HTTP requests answered, by route pattern and status code.
# TYPE runos_control_http_requests_total counter
runos_control_http_requests_total{code="200",route="GET /v1/me"} 2
runos_control_http_requests_total{code="401",route="GET /v1/devices/{id}/map"} 1
runos_control_http_requests_total{code="404",route="unmatched"} 1
# HELP runos_control_longpolls_held Long-polls being held open now, by kind (device_map, gateway_map, move, service).
# TYPE runos_control_longpolls_held gauge
runos_control_longpolls_held{kind="device_map"} 0
runos_control_longpolls_held{kind="gateway_map"} 1
# HELP runos_control_streams_held Push streams open now, by kind (device_map, gateway_map, move, service).
# TYPE runos_control_streams_held gauge
runos_control_streams_held{kind="device_map"} 2
runos_control_streams_held{kind="gateway_map"} 0
# HELP runos_control_streams_dropped_total Push streams dropped by control, by kind and reason (slow: the client did not read within the bound; gone: the connection failed).
# TYPE runos_control_streams_dropped_total counter
runos_control_streams_dropped_total{kind="device_map",reason="slow"} 1
# HELP runos_control_moves_total VPN server moves finished, by outcome (done, deadline: done with devices left behind, failed).
# TYPE runos_control_moves_total counter
runos_control_moves_total{outcome="done"} 1
runos_control_moves_total{outcome="failed"} 1
# HELP runos_control_join_acks_total Joins' waits for a gateway to hold the device (the serving node, and a move's target), by outcome (acked; timeout: answered anyway after the bound).
# TYPE runos_control_join_acks_total counter
runos_control_join_acks_total{outcome="timeout"} 1
# HELP runos_control_signin_refusals_total Sign-in attempts refused, by reason.
# TYPE runos_control_signin_refusals_total counter
runos_control_signin_refusals_total{reason="wrong_password"} 2
# HELP runos_control_signins_total Sessions issued by the token endpoint, by grant (authorization_code, device_code).
# TYPE runos_control_signins_total counter
runos_control_signins_total{grant="authorization_code"} 1
# HELP runos_control_sessions_live Sessions live now (signed in and not expired).
# TYPE runos_control_sessions_live gauge
runos_control_sessions_live 3
# HELP runos_control_devices Registered devices by state (connected: live session and a cluster joined; signed_in; signed_out; revoked).
# TYPE runos_control_devices gauge
runos_control_devices{state="connected"} 2
runos_control_devices{state="signed_out"} 1
`
	names := []string{"runos_control_http_requests_total", "runos_control_longpolls_held", "runos_control_streams_held", "runos_control_streams_dropped_total", "runos_control_moves_total", "runos_control_join_acks_total",
		"runos_control_signin_refusals_total", "runos_control_signins_total", "runos_control_sessions_live", "runos_control_devices"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.switchT); n != 1 {
		t.Errorf("switch-time histogram: %d series", n)
	}
	body := scrape(t, m)
	for _, s := range []string{"runos_control_fanout_seconds_count 1", "runos_control_move_switch_seconds_sum 0.04", "go_goroutines", "process_"} {
		if !strings.Contains(body, s) {
			t.Errorf("scrape lacks %q", s)
		}
	}
	if strings.Contains(body, "d-secret-id") {
		t.Error("a path's id became a label")
	}
}

func TestStoreErrorIsAMetricNotAFailure(t *testing.T) {
	m := New(fakeStats{err: errors.New("database is locked")}, time.Now)
	if body := scrape(t, m); !strings.Contains(body, "runos_control_stats_errors 1") {
		t.Errorf("scrape:\n%s", body)
	}
}

func scrape(t *testing.T, m *Control) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestTLSGateMetrics: the gate's counts as they are at the scrape.
func TestTLSGateMetrics(t *testing.T) {
	m := New(nil, time.Now)
	s := tlsgate.Stats{Waiting: 5, InFlight: 4, Done: 100, Failed: 2, Expired: 1}
	m.TLSGate(func() tlsgate.Stats { return s })
	want := `
# HELP runos_control_tls_handshakes_in_flight TLS handshakes computing now, each holding a slot (at most the gate's slots; one waiting for its client holds none).
# TYPE runos_control_tls_handshakes_in_flight gauge
runos_control_tls_handshakes_in_flight 4
# HELP runos_control_tls_handshakes_total TLS handshakes by outcome (done; failed: refused, or its client too slow; expired: its time ran out waiting for a slot).
# TYPE runos_control_tls_handshakes_total counter
runos_control_tls_handshakes_total{outcome="done"} 100
runos_control_tls_handshakes_total{outcome="expired"} 1
runos_control_tls_handshakes_total{outcome="failed"} 2
# HELP runos_control_tls_handshakes_waiting TLS handshakes whose client has sent its part, waiting for one of the handshake slots to compute theirs (control/tlsgate).
# TYPE runos_control_tls_handshakes_waiting gauge
runos_control_tls_handshakes_waiting 5
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"runos_control_tls_handshakes_waiting", "runos_control_tls_handshakes_in_flight", "runos_control_tls_handshakes_total"); err != nil {
		t.Fatal(err)
	}
	s.Waiting = 0 // read again at the next scrape
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(strings.Replace(want, "waiting 5", "waiting 0", 1)),
		"runos_control_tls_handshakes_waiting"); err != nil {
		t.Fatal(err)
	}
	var nilM *Control
	nilM.TLSGate(func() tlsgate.Stats { return s }) // records nothing, does not panic
}
