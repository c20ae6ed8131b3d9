//go:build !windows

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/vpnd/localapi"
)

// The lab benchmarks do their fixed amount of work once per run (a lab
// takes seconds to build, so the framework stops at b.N = 1 with the
// default -benchtime); more iterations with -benchtime=Nx.

// BenchmarkConnectToPeerUp: from POST /v1/connect (session valid) to the
// daemon reporting peerUp for the cluster, through the local API, against
// the real control and gateway in the lab (issue 2's first number).
func BenchmarkConnectToPeerUp(b *testing.B) {
	w := newWorld(b, 1, 0)
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("", "ky3"))
	d := w.daemon(laptop)
	n := max(b.N, 20)
	var samples []time.Duration
	b.ResetTimer()
	for range n {
		if _, err := d.Disconnect(b.Context(), "xym"); err != nil && !strings.Contains(err.Error(), "not") {
			b.Fatal(err)
		}
		w.waitStatus(laptop, 10*time.Second, "xym down", func(s *localapi.Status) bool {
			c, ok := cluster(s, "xym")
			return !ok || !c.PeerUp
		})
		start := time.Now()
		if _, err := d.Connect(b.Context(), "xym"); err != nil {
			b.Fatal(err)
		}
		w.waitStatus(laptop, 10*time.Second, "xym up", upOn("", "xym"))
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	reportDurations(b, "connect-to-peerUp", samples)

	// The daemon's resident memory with two clusters connected.
	pid := w.pidOf(laptop, "vpnd")
	b.ReportMetric(float64(rssKB(b, pid))/1024, "vpnd-RSS-MB")
}

// BenchmarkMoveSwitch10Laptops: ten laptops, each its own namespace and
// daemon, connected to ky3; the server moves n1 → n2 → n1 …; each move's
// switch time is control's switchMs (from taking the move to the last
// device's handshake with the new node). Issue 3's headline number.
func BenchmarkMoveSwitch10Laptops(b *testing.B) {
	const laptops = 10
	w := newWorld(b, laptops, 0)
	for _, c := range w.env.Clients {
		w.must(c.Host, nil, "runos", "vpn", "up", "--cid", "ky3")
	}
	for _, c := range w.env.Clients {
		w.waitStatus(c.Host, 30*time.Second, "connected to ky3", upOn("n1", "ky3"))
	}
	n := max(b.N, 20)
	var samples []time.Duration
	target := "n2"
	b.ResetTimer()
	for range n {
		m, out, err := w.move(target)
		if err != nil || m.Devices.Switched != laptops {
			b.Fatalf("move to %s: %+v %v\n%s", target, m, err, out)
		}
		samples = append(samples, time.Duration(m.SwitchMs)*time.Millisecond)
		for _, c := range w.env.Clients {
			w.waitStatus(c.Host, 10*time.Second, "on "+target, upOn(target, "ky3"))
		}
		target = map[string]string{"n1": "n2", "n2": "n1"}[target]
	}
	b.StopTimer()
	reportDurations(b, "switch", samples)
}

// BenchmarkTunnelThroughput: TCP from the laptop to ky3-n1 with iperf3,
// side by side over the same path (the laptop's LAN veth, the lab's
// bridge, the node's veth): through the RunOS tunnel (runos vpnd ↔
// runos-gateway), through a pair of Debian's stock wireguard-go configured
// by wg, and bare, the ceiling. Issue 2's third number and its two ratios.
func BenchmarkTunnelThroughput(b *testing.B) {
	netnstest.Require(b, "iperf3")
	w := newWorld(b, 1, 0)
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("n1", "ky3"))
	c, _ := cluster(st, "ky3")

	// The stock pair on the same two hosts, its own subnet and port.
	stockSrv, stockCli := w.stockPeer(b, "ky3-n1", "10.99.0.1/24", 51999), w.stockPeer(b, laptop, "10.99.0.2/24", 0)
	w.must("ky3-n1", nil, "wg", "set", stockSrv.iface, "peer", stockCli.pub, "allowed-ips", "10.99.0.2/32")
	w.must(laptop, nil, "wg", "set", stockCli.iface, "peer", stockSrv.pub, "allowed-ips", "10.99.0.0/24",
		"endpoint", "10.77.0.21:51999", "persistent-keepalive", "1")

	srv, err := w.lab.Command(context.Background(), "ky3-n1", nil, "iperf3", "-s")
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() })
	w.waitFor(10*time.Second, "iperf3 server", func() bool {
		c, err := w.lab.Dial(b.Context(), laptop, "tcp", "10.77.0.21:5201")
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	rates := map[string]float64{}
	modes := []struct{ name, addr string }{
		{"bare", "10.77.0.21"}, {"stock-wireguard-go", "10.99.0.1"}, {"runos", c.Server.Address},
	}
	b.ResetTimer()
	for range max(b.N, 1) {
		for _, m := range modes {
			out := w.stdout(laptop, nil, "iperf3", "-c", m.addr, "-t", "3", "-J")
			var r struct {
				End struct {
					SumReceived struct {
						BitsPerSecond float64 `json:"bits_per_second"`
					} `json:"sum_received"`
				} `json:"end"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil || r.End.SumReceived.BitsPerSecond == 0 {
				b.Fatalf("iperf3 to %s (%s): %v\n%s", m.addr, m.name, err, out)
			}
			rates[m.name] = max(rates[m.name], r.End.SumReceived.BitsPerSecond/1e6)
		}
	}
	b.StopTimer()
	for _, m := range modes {
		b.ReportMetric(rates[m.name], m.name+"-Mbit/s")
	}
	b.ReportMetric(rates["runos"]/rates["stock-wireguard-go"], "runos/stock")
	b.ReportMetric(rates["runos"]/rates["bare"], "runos/bare")
}

type stock struct{ iface, pub string }

// stockPeer runs Debian's wireguard-go on a host with a fresh key and the
// given address (and listen port, 0 for any), stopped when b ends.
func (w *world) stockPeer(b *testing.B, host, addr string, port int) stock {
	key, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		b.Fatal(err)
	}
	iface := "wgs" + strconv.Itoa(os.Getpid()%10000)
	cmd, err := w.lab.Command(context.Background(), host, nil, "wireguard-go", "-f", iface)
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	w.waitFor(10*time.Second, "wireguard-go on "+host, func() bool {
		_, err := w.run(host, nil, "wg", "show", iface)
		return err == nil
	})
	kf := filepath.Join(b.TempDir(), "key")
	os.WriteFile(kf, []byte(key.String()+"\n"), 0o600)
	args := []string{"wg", "set", iface, "private-key", kf}
	if port != 0 {
		args = append(args, "listen-port", strconv.Itoa(port))
	}
	w.must(host, nil, args...)
	w.must(host, nil, "ip", "addr", "add", addr, "dev", iface)
	w.must(host, nil, "ip", "link", "set", iface, "up")
	return stock{iface: iface, pub: key.PublicKey().String()}
}

func reportDurations(b *testing.B, name string, ds []time.Duration) {
	slices.Sort(ds)
	q := func(p float64) float64 {
		i := int(p*float64(len(ds)-1) + 0.5)
		return float64(ds[i].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), name+"-p50-ms")
	b.ReportMetric(q(0.99), name+"-p99-ms")
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, name+"-max-ms")
	b.ReportMetric(float64(len(ds)), name+"-samples")
	b.Logf("%s over %d samples: %v", name, len(ds), ds)
}

func rssKB(b *testing.B, pid int) int {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			n, _ := strconv.Atoi(f[0])
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
