// Package metrics is runos-control's Prometheus instrumentation
// (github.com/prometheus/client_golang), served on --metrics-addr: HTTP
// requests by route and code with latency histograms, long-polls and push
// streams held by kind (and streams dropped), the fan-out latency from a
// commit to the last long-poll answer or stream event it caused, store
// transaction latency, sign-ins and refusals by reason, moves by outcome
// with the switch time, live sessions and devices by state (read from the
// store at scrape time), and the Go runtime and process collectors.
//
// Labels take their values from fixed sets (route patterns, status codes,
// kinds, reasons, outcomes): never a token, key, user, device or cluster
// id, so neither a secret nor an unbounded series can appear. It is not an
// endpoint of the API: control.Run serves its Handler on an address of its
// own, unauthenticated, only when the operator asks for one.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/runos/vpn/control/store"
)

const ns = "runos_control"

// Control holds control's collectors. Its methods are safe for concurrent
// use; a nil *Control records nothing.
type Control struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	polls    *prometheus.GaugeVec
	streams  *prometheus.GaugeVec
	dropped  *prometheus.CounterVec
	fanout   prometheus.Histogram
	storeTx  *prometheus.HistogramVec
	signins  *prometheus.CounterVec
	refusals *prometheus.CounterVec
	moves    *prometheus.CounterVec
	switchT  prometheus.Histogram
	joinAcks *prometheus.CounterVec
}

// New returns control's collectors, registered with the Go runtime and
// process collectors; st (may be nil) is read at every scrape for the live
// sessions and devices by state, with now as the clock.
func New(st store.StatsReader, now func() time.Time) *Control {
	m := &Control{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code."}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern (long-polls include the time held).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 30, 60, 120, 300}}, []string{"route"}),
		polls: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "longpolls_held",
			Help: "Long-polls being held open now, by kind (device_map, gateway_map, move, service)."}, []string{"kind"}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "streams_held",
			Help: "Push streams open now, by kind (device_map, gateway_map, move, service)."}, []string{"kind"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "streams_dropped_total",
			Help: "Push streams dropped by control, by kind and reason (slow: the client did not read within the bound; gone: the connection failed)."}, []string{"kind", "reason"}),
		fanout: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "fanout_seconds",
			Help:    "From a change's commit to the last long-poll answer or stream event it caused having been written.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		storeTx: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "store_transaction_seconds",
			Help:    "Store transactions' latency, by kind (view, update).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}}, []string{"kind"}),
		signins: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "signins_total",
			Help: "Sessions issued by the token endpoint, by grant (authorization_code, device_code)."}, []string{"grant"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "signin_refusals_total",
			Help: "Sign-in attempts refused, by reason."}, []string{"reason"}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "moves_total",
			Help: "VPN server moves finished, by outcome (done, deadline: done with devices left behind, failed)."}, []string{"outcome"}),
		switchT: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "move_switch_seconds",
			Help:    "A finished move's switch time: from control taking the move to the last device's handshake with the new node.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}),
		joinAcks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "join_acks_total",
			Help: "Joins' waits for a gateway to hold the device (the serving node, and a move's target), by outcome (acked; timeout: answered anyway after the bound)."}, []string{"outcome"}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.polls, m.streams, m.dropped, m.fanout, m.storeTx, m.signins, m.refusals, m.moves, m.switchT, m.joinAcks,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if st != nil {
		m.reg.MustRegister(&statsCollector{st: st, now: now})
	}
	return m
}

// Handler serves the metrics in Prometheus's exposition format.
func (m *Control) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry (tests gather from it).
func (m *Control) Registry() *prometheus.Registry { return m.reg }

// Wrap counts and times every request next answers, labelled with the
// route pattern the mux matched (r.Pattern, set on the same request by the
// muxes below), never the path itself: ids stay out of the labels.
func (m *Control) Wrap(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, codeLabel(sw.code)).Inc()
		m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// statusWriter remembers the status code; Flush and Unwrap keep
// streaming and http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func codeLabel(c int) string {
	if c < 100 || c > 599 {
		return "other"
	}
	return strconv.Itoa(c)
}

// PollHeld counts a long-poll of kind as held until the returned func runs.
func (m *Control) PollHeld(kind string) (done func()) {
	if m == nil {
		return func() {}
	}
	g := m.polls.WithLabelValues(kind)
	g.Inc()
	return g.Dec
}

// StreamHeld counts a push stream of kind as open until the returned func
// runs.
func (m *Control) StreamHeld(kind string) (done func()) {
	if m == nil {
		return func() {}
	}
	g := m.streams.WithLabelValues(kind)
	g.Inc()
	return g.Dec
}

// StreamDropped counts a stream control dropped, by reason (slow, gone).
func (m *Control) StreamDropped(kind, reason string) {
	if m != nil {
		m.dropped.WithLabelValues(kind, reason).Inc()
	}
}

// FanOut records a change's fan-out: from its commit to the last woken
// long-poll's answer.
func (m *Control) FanOut(d time.Duration) {
	if m != nil {
		m.fanout.Observe(d.Seconds())
	}
}

// JoinAcked counts a join's wait for its gateway by outcome (acked, timeout).
func (m *Control) JoinAcked(outcome string) {
	if m == nil {
		return
	}
	m.joinAcks.WithLabelValues(outcome).Inc()
}

// MoveFinished counts a finished move; switchMs is observed for a done
// move that saw a handshake (switchMs > 0 or outcome done).
func (m *Control) MoveFinished(outcome string, switchMs int64, sawHandshake bool) {
	if m == nil {
		return
	}
	m.moves.WithLabelValues(outcome).Inc()
	if outcome != "failed" && sawHandshake {
		m.switchT.Observe(float64(switchMs) / 1000)
	}
}

// SignedIn counts a session issued through grant.
func (m *Control) SignedIn(grant string) {
	if m != nil {
		m.signins.WithLabelValues(grant).Inc()
	}
}

// Refused counts a refused sign-in attempt.
func (m *Control) Refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

// statsCollector reads the store at scrape time.
type statsCollector struct {
	st  store.StatsReader
	now func() time.Time
}

var (
	sessionsDesc = prometheus.NewDesc(ns+"_sessions_live", "Sessions live now (signed in and not expired).", nil, nil)
	devicesDesc  = prometheus.NewDesc(ns+"_devices", "Registered devices by state (connected: live session and a cluster joined; signed_in; signed_out; revoked).", []string{"state"}, nil)
	statsErrDesc = prometheus.NewDesc(ns+"_stats_errors", "1 when the last scrape could not read the store's counts.", nil, nil)
)

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sessionsDesc
	ch <- devicesDesc
	ch <- statsErrDesc
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.st.Stats(ctx, c.now())
	if err != nil {
		ch <- prometheus.MustNewConstMetric(statsErrDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(statsErrDesc, prometheus.GaugeValue, 0)
	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(st.LiveSessions))
	for state, n := range st.Devices {
		ch <- prometheus.MustNewConstMetric(devicesDesc, prometheus.GaugeValue, float64(n), state)
	}
}
