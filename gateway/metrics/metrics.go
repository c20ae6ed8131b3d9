// Package metrics is runos-gateway's Prometheus instrumentation
// (github.com/prometheus/client_golang), served on --metrics-addr: the
// peers of the WireGuard server, handshakes seen, bytes in and out, the
// role served, packets the access policy dropped (in all, and per rule),
// the time since control last answered, and the Go runtime and process
// collectors. Labels are fixed words (the role, a drop's reason) or the
// account's own policy rules, never a key or a device. It implements
// gateway.Metrics; it does not serve the VPN.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/runos/vpn/gateway/policyfilter"
)

const ns = "runos_gateway"

// Roles a gateway serves (api.Gateway*), and "none".
var roles = []string{"active", "standby", "draining", "none"}

// Gateway holds the gateway's collectors; safe for concurrent use.
type Gateway struct {
	reg        *prometheus.Registry
	peers      prometheus.Gauge
	handshakes prometheus.Counter
	rx, tx     prometheus.Counter
	role       *prometheus.GaugeVec
	refused    prometheus.Counter
	now        func() time.Time

	mu       sync.Mutex
	answered time.Time                // control's last answer; zero: none yet
	dropped  func() map[string]uint64 // forwarding's drop counters; nil: none
	byRule   func() []policyfilter.RuleDrops
}

// New returns the gateway's collectors; now is the clock of the
// time-since-control gauge.
func New(now func() time.Time) *Gateway {
	g := &Gateway{
		reg: prometheus.NewRegistry(),
		now: now,
		peers: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "peers",
			Help: "Devices configured as peers of this node's WireGuard server (0 when not serving)."}),
		handshakes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "handshakes_total",
			Help: "New handshakes seen on the WireGuard server (read every heartbeat, and every 20 ms while devices are switching)."}),
		rx: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "received_bytes_total",
			Help: "Bytes received from devices through the tunnel."}),
		tx: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "transmitted_bytes_total",
			Help: "Bytes sent to devices through the tunnel."}),
		role: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "role",
			Help: "1 for the role this node serves for its cluster's VPN (active, standby, draining, none)."}, []string{"role"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "policy_dropped_packets_total",
			Help: "Packets from devices dropped because the account's access policy does not let their user reach the destination."}),
	}
	since := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "control_last_answer_age_seconds",
		Help: "Seconds since control last answered (a map or a report); -1 before its first answer."}, g.sinceControl)
	g.reg.MustRegister(g.peers, g.handshakes, g.rx, g.tx, g.role, g.refused, since, dropCollector{g}, ruleCollector{g},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	g.Serving("", 0)
	return g
}

// Handler serves the metrics in Prometheus's exposition format.
func (g *Gateway) Handler() http.Handler {
	return promhttp.HandlerFor(g.reg, promhttp.HandlerOpts{Registry: g.reg})
}

// Registry is the registry (tests gather from it).
func (g *Gateway) Registry() *prometheus.Registry { return g.reg }

// Serving sets the role and the number of peers.
func (g *Gateway) Serving(role string, peers int) {
	if role == "" {
		role = "none"
	}
	for _, r := range roles {
		v := 0.0
		if r == role {
			v = 1
		}
		g.role.WithLabelValues(r).Set(v)
	}
	g.peers.Set(float64(peers))
}

// Handshakes counts new handshakes.
func (g *Gateway) Handshakes(n int) { g.handshakes.Add(float64(n)) }

// Traffic adds bytes received and sent.
func (g *Gateway) Traffic(rx, tx uint64) {
	g.rx.Add(float64(rx))
	g.tx.Add(float64(tx))
}

// PolicyDropped counts a packet the access policy refused.
func (g *Gateway) PolicyDropped() { g.refused.Inc() }

// PolicyRuleDrops gives the policy filter's refusals per rule, read at
// each scrape (policy_dropped_packets_total stays their sum, for the
// scripts that read it).
func (g *Gateway) PolicyRuleDrops(read func() []policyfilter.RuleDrops) {
	g.mu.Lock()
	g.byRule = read
	g.mu.Unlock()
}

var byRuleDesc = prometheus.NewDesc(ns+"_policy_dropped_packets_by_rule_total",
	"Packets from devices the access policy refused, by the rule they were counted against: the first of the user's rules reaching the destination's address but not its port or protocol (line and rule as in the policy document), or rule=\"default deny\" (line 0) when no rule reaches it. Only rules that refused a packet are listed.",
	[]string{"line", "rule"}, nil)

// ruleCollector reads the refusals per rule when scraped.
type ruleCollector struct{ g *Gateway }

func (c ruleCollector) Describe(ch chan<- *prometheus.Desc) { ch <- byRuleDesc }

func (c ruleCollector) Collect(ch chan<- prometheus.Metric) {
	c.g.mu.Lock()
	read := c.g.byRule
	c.g.mu.Unlock()
	if read == nil {
		return
	}
	for _, r := range read() {
		ch <- prometheus.MustNewConstMetric(byRuleDesc, prometheus.CounterValue, float64(r.Packets), strconv.Itoa(r.Line), r.Rule)
	}
}

// ControlAnswered records control's latest answer.
func (g *Gateway) ControlAnswered(at time.Time) {
	g.mu.Lock()
	if at.After(g.answered) {
		g.answered = at
	}
	g.mu.Unlock()
}

func (g *Gateway) sinceControl() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.answered.IsZero() {
		return -1
	}
	return g.now().Sub(g.answered).Seconds()
}

// ReachDropped gives the counters of what devices sent through the node
// that forwarding dropped, by reason (gateway/reach), read at each scrape.
func (g *Gateway) ReachDropped(read func() map[string]uint64) {
	g.mu.Lock()
	g.dropped = read
	g.mu.Unlock()
}

var droppedDesc = prometheus.NewDesc(ns+"_reach_dropped_packets_total",
	"Packets devices sent through this node that were dropped: to another device, to the node's other addresses, neither TCP nor UDP into the cluster, or outside the cluster's declared prefixes.",
	[]string{"reason"}, nil)

// dropCollector reads the drop counters when scraped.
type dropCollector struct{ g *Gateway }

func (c dropCollector) Describe(ch chan<- *prometheus.Desc) { ch <- droppedDesc }

func (c dropCollector) Collect(ch chan<- prometheus.Metric) {
	c.g.mu.Lock()
	read := c.g.dropped
	c.g.mu.Unlock()
	if read == nil {
		return
	}
	for reason, n := range read() {
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(n), reason)
	}
}
