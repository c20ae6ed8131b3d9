package vpnd

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/internal/wgtest"
	"github.com/runos/vpn/vpnd/localapi"
)

// iperf runs iperf3 from the laptop namespace to addr (a server started in
// ns) for a few seconds and returns the received rate in Mbit/s.
func iperf(b *testing.B, from, ns *netnstest.NS, addr string) float64 {
	b.Helper()
	port := fmt.Sprint(5201 + time.Now().Nanosecond()%500)
	ns.Start(nil, "iperf3", "-s", "-1", "-B", addr, "-p", port)
	time.Sleep(200 * time.Millisecond)
	var out string
	var err error
	for range 20 {
		if out, err = from.Exec("iperf3", "-c", addr, "-p", port, "-t", "3", "-J"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		b.Fatalf("iperf3 to %s: %v", addr, err)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		b.Fatalf("iperf3 output: %v", err)
	}
	return r.End.SumReceived.BitsPerSecond / 1e6
}

// BenchmarkThroughput: TCP from the laptop to a node with iperf3 in one
// run, three ways: through the daemon's tunnel (to the stock server),
// through a pair of Debian's stock wireguard-go configured by wg over an
// identical veth, and over the bare veth (the ceiling). Reported in Mbit/s
// with the two ratios; b.N is ignored (each way is one 3 s transfer).
func BenchmarkThroughput(b *testing.B) {
	netnstest.Require(b, "iperf3")
	l := newLab(b)
	l.start()
	l.signIn(b)
	if _, err := l.client.Connect(b.Context(), "ky3"); err != nil {
		b.Fatal(err)
	}
	l.waitStatus("ky3 up", func(st *localapi.Status) bool { return peerUp("ky3")(st) })
	n1 := l.servers["ky3/n1"].NS

	// The stock pair: a client wireguard-go in a namespace of its own,
	// over its own veth to a stock server.
	sc := netnstest.New(b, "stc")
	ss := netnstest.New(b, "sts")
	netnstest.Link(b, sc, "eth0", "10.9.0.1/24", ss, "eth0", "10.9.0.2/24")
	srv := wgtest.StartServer(b, ss, netip.MustParsePrefix("100.100.9.1/24"), 32768, labDevicePool)
	cli := wgtest.StartServer(b, sc, netip.MustParsePrefix("100.96.9.2/32"), 32769, netip.MustParsePrefix("100.100.9.0/24"))
	if err := srv.AddPeer(cli.PublicKey(), netip.MustParseAddr("100.96.9.2")); err != nil {
		b.Fatal(err)
	}
	sc.MustExec("wg", "set", cli.Iface, "peer", srv.PublicKey(), "endpoint", "10.9.0.2:32768", "allowed-ips", "100.100.9.0/24")
	sc.MustExec("ping", "-c", "1", "-W", "5", "100.100.9.1")

	b.ResetTimer()
	ours := iperf(b, l.laptop, n1, "100.100.1.1")
	stock := iperf(b, sc, ss, "100.100.9.1")
	bare := iperf(b, l.laptop, n1, "10.1.0.2")
	b.StopTimer()
	b.ReportMetric(ours, "vpnd-Mbit/s")
	b.ReportMetric(stock, "stock-Mbit/s")
	b.ReportMetric(bare, "veth-Mbit/s")
	b.ReportMetric(ours/stock, "vs-stock")
	b.ReportMetric(ours/bare, "vs-veth")
}
