//go:build !windows

package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// With Options.Metrics the lab runs Debian's prometheus on the control
// host, scraping control (--metrics-addr on its WAN address) and every
// node's gateway, once a second so that tests see a change within a few.
// It is reached from inside the lab (runos-lab exec control -- curl …,
// or Lab.HTTPClient("control")), like every address of the lab.
const (
	ControlMetricsPort = 9464
	GatewayMetricsPort = 9465
	PrometheusPort     = 9090
	prometheusInterval = "1s"
)

// PrometheusURL is the lab's Prometheus ("" without --metrics).
func (l *Lab) PrometheusURL() string {
	if !l.metrics {
		return ""
	}
	return "http://" + l.topo.ControlIP.String() + ":" + strconv.Itoa(PrometheusPort)
}

func (l *Lab) prometheusDir() string { return filepath.Join(l.dir, "prometheus") }

// controlMetricsAddr is where runos-control on host serves its metrics:
// control, or each replica on its own address.
func (l *Lab) controlMetricsAddr(host string) string {
	h, _ := l.topo.Host(host)
	return h.Addrs[WAN].String() + ":" + strconv.Itoa(ControlMetricsPort)
}

func (l *Lab) gatewayMetricsAddr(host string) string {
	h, _ := l.topo.Host(host)
	return h.Addrs[WAN].String() + ":" + strconv.Itoa(GatewayMetricsPort)
}

// writePrometheusConfig writes D/prometheus/prometheus.yml: control and
// every gateway, each gateway target labelled with its cluster and node.
func (l *Lab) writePrometheusConfig() error {
	if err := l.j.file("prometheus"); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(l.prometheusDir(), "data"), 0o700); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by runos-lab for lab %s.\nglobal:\n  scrape_interval: %s\n  evaluation_interval: %s\nscrape_configs:\n",
		l.names.Prefix, prometheusInterval, prometheusInterval)
	b.WriteString("  - job_name: runos-control\n    static_configs:\n")
	for _, h := range l.topo.ControlHosts() {
		fmt.Fprintf(&b, "      - targets: [%q]\n        labels: {replica: %q}\n", l.controlMetricsAddr(h.Name), h.Name)
	}
	b.WriteString("  - job_name: runos-gateway\n    static_configs:\n")
	for _, h := range l.topo.Hosts {
		if h.Kind == KindNode {
			fmt.Fprintf(&b, "      - targets: [%q]\n        labels: {cluster: %q, node: %q}\n", l.gatewayMetricsAddr(h.Name), h.CID, h.NID)
		}
	}
	return os.WriteFile(filepath.Join(l.prometheusDir(), "prometheus.yml"), []byte(b.String()), 0o644)
}

func (l *Lab) prometheusProc() Proc {
	d := l.prometheusDir()
	return Proc{Host: "control", Name: "prometheus", Argv: []string{"prometheus",
		"--config.file=" + filepath.Join(d, "prometheus.yml"),
		"--storage.tsdb.path=" + filepath.Join(d, "data"),
		"--web.listen-address=" + l.topo.ControlIP.String() + ":" + strconv.Itoa(PrometheusPort),
	}}
}

// prometheusReady: /-/ready answers 200.
func (l *Lab) prometheusReady(ctx context.Context) error {
	c, err := l.HTTPClient("control")
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.PrometheusURL()+"/-/ready", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("prometheus /-/ready: %s %s", resp.Status, b)
	}
	return nil
}
