package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/runos/vpn/control/tlsgate"
)

var (
	tlsWaitingDesc = prometheus.NewDesc(ns+"_tls_handshakes_waiting",
		"TLS handshakes whose client has sent its part, waiting for one of the handshake slots to compute theirs (control/tlsgate).", nil, nil)
	tlsInFlightDesc = prometheus.NewDesc(ns+"_tls_handshakes_in_flight",
		"TLS handshakes computing now, each holding a slot (at most the gate's slots; one waiting for its client holds none).", nil, nil)
	tlsTotalDesc = prometheus.NewDesc(ns+"_tls_handshakes_total",
		"TLS handshakes by outcome (done; failed: refused, or its client too slow; expired: its time ran out waiting for a slot).", []string{"outcome"}, nil)
)

// TLSGate reports the handshake gate's counts at every scrape
// (runos_control_tls_handshakes_waiting, _in_flight, _total{outcome}).
// stats is the gate's Stats; a nil *Control records nothing.
func (m *Control) TLSGate(stats func() tlsgate.Stats) {
	if m == nil {
		return
	}
	m.reg.MustRegister(gateCollector(stats))
}

type gateCollector func() tlsgate.Stats

func (c gateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tlsWaitingDesc
	ch <- tlsInFlightDesc
	ch <- tlsTotalDesc
}

func (c gateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c()
	ch <- prometheus.MustNewConstMetric(tlsWaitingDesc, prometheus.GaugeValue, float64(s.Waiting))
	ch <- prometheus.MustNewConstMetric(tlsInFlightDesc, prometheus.GaugeValue, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(tlsTotalDesc, prometheus.CounterValue, float64(s.Done), "done")
	ch <- prometheus.MustNewConstMetric(tlsTotalDesc, prometheus.CounterValue, float64(s.Failed), "failed")
	ch <- prometheus.MustNewConstMetric(tlsTotalDesc, prometheus.CounterValue, float64(s.Expired), "expired")
}
