//go:build !windows

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestMetricsAfterAMove: a lab up with --metrics; after one sign-in, a
// connect and one move, Prometheus (Debian's, scraping control and every
// gateway) has control's counters moved by exactly that: one sign-in, one
// move done with its switch time equal to control's switchMs, and n2's
// gateway active. The laptop's own counters (status --json metrics) count
// the move's reconnect and exactly the DNS queries sent to its forwarder.
func TestMetricsAfterAMove(t *testing.T) {
	w := newWorldWith(t, lab.Options{Clients: 1, Metrics: true})
	h := w.env.Client.Host
	if w.env.PrometheusURL == "" {
		t.Fatal("no Prometheus URL in env.json with --metrics")
	}
	w.must(h, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.waitStatus(h, 30*time.Second, "connected to ky3", upOn("n1", "ky3"))

	m, out, err := w.move("n2")
	if err != nil || m.State != "done" {
		t.Fatalf("move: %v %+v\n%s", err, m, out)
	}
	w.waitStatus(h, 10*time.Second, "on n2", upOn("n2", "ky3"))

	w.promEquals(`sum(runos_control_signins_total)`, 1)
	w.promEquals(`sum(runos_control_signin_refusals_total) or vector(0)`, 0)
	w.promEquals(`runos_control_moves_total{outcome="done"}`, 1)
	w.promEquals(`sum(runos_control_moves_total)`, 1)
	w.promEquals(`runos_control_move_switch_seconds_count`, 1)
	w.promEquals(`runos_control_move_switch_seconds_sum`, float64(m.ControlSwitchMs)/1000)
	w.promEquals(`runos_control_sessions_live`, 1)
	w.promEquals(`runos_control_devices{state="connected"}`, 1)
	w.promEquals(`runos_gateway_role{node="n2",role="active"}`, 1)
	w.promEquals(`runos_gateway_role{node="n1",role="active"}`, 0)
	w.promEquals(`runos_gateway_peers{node="n2"}`, 1)
	w.promEquals(`sum(runos_control_http_requests_total{route="POST /v1/clusters/{cid}/services/wireguard/{id}/moves"})`, 1)
	w.promEquals(`count(up{job="runos-gateway"} == 1)`, 3)
	if v := w.prom(`sum(runos_gateway_handshakes_total{node="n2"})`); v < 1 {
		t.Errorf("n2's gateway counted %v handshakes, want at least the device's", v)
	}
	if v := w.prom(`sum(runos_control_fanout_seconds_count)`); v < 1 {
		t.Errorf("no fan-out observed (%v)", v)
	}

	// The daemon's own counters: the move was one reconnect of ky3, and
	// three queries to its forwarder are three answered, three forwarded.
	before := w.metrics(h)
	for i := range 3 {
		q := new(dns.Msg)
		q.SetQuestion(fmt.Sprintf("app%d.%s.", i, w.env.Clusters[0].Domain), dns.TypeA)
		c, err := w.lab.Dial(t.Context(), h, "udp", "127.0.80.53:53")
		if err != nil {
			t.Fatal(err)
		}
		conn := &dns.Conn{Conn: c}
		if err := conn.WriteMsg(q); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		r, err := conn.ReadMsg()
		c.Close()
		if err != nil || len(r.Answer) == 0 {
			t.Fatalf("query %d through the forwarder: %v %v", i, r, err)
		}
	}
	after := w.metrics(h)
	if d := after.DNS.Answered - before.DNS.Answered; d != 3 {
		t.Errorf("answered moved by %d, want 3", d)
	}
	if d := after.DNS.Forwarded - before.DNS.Forwarded; d != 3 {
		t.Errorf("forwarded moved by %d, want 3", d)
	}
	if len(after.Clusters) != 1 || after.Clusters[0].CID != "ky3" || after.Clusters[0].Reconnects != 1 ||
		after.Clusters[0].Handshakes < 2 || after.Clusters[0].RxBytes == 0 {
		t.Errorf("ky3's counters after one move: %+v", after.Clusters)
	}
}

// metrics reads the laptop's counters with `runos vpn status --json`.
func (w *world) metrics(host string) localapi.Metrics {
	w.t.Helper()
	st := w.status(host)
	if st.Metrics == nil {
		w.t.Fatalf("runos vpn status --json on %s has no metrics", host)
	}
	return *st.Metrics
}

// prom is one value of a PromQL instant query against the lab's
// Prometheus (NaN when the query has no result).
func (w *world) prom(query string) float64 {
	w.t.Helper()
	c, err := w.lab.HTTPClient("control")
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.env.PrometheusURL+"/api/v1/query?query="+url.QueryEscape(query), nil)
	resp, err := c.Do(req)
	if err != nil {
		w.t.Fatalf("prometheus %s: %v", query, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Status != "success" {
		w.t.Fatalf("prometheus %s: %v %s", query, err, b)
	}
	if len(r.Data.Result) == 0 {
		return math.NaN()
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		w.t.Fatalf("prometheus %s: value %q", query, s)
	}
	return v
}

// promEquals waits (scrapes run every second) until query gives want.
func (w *world) promEquals(query string, want float64) {
	w.t.Helper()
	var got float64
	deadline := time.Now().Add(20 * time.Second)
	for {
		got = w.prom(query)
		if math.Abs(got-want) < 1e-9 {
			return
		}
		if time.Now().After(deadline) {
			w.t.Errorf("%s = %v, want %v", query, got, want)
			return
		}
		time.Sleep(250 * time.Millisecond) // Prometheus scrapes once a second
	}
}
