//go:build linux

package labbench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/netnstest"
)

// throughputRound is one round: each path's rate and the ratios within it.
type throughputRound struct {
	N     int                `json:"n"`
	Order []string           `json:"order"`
	Mbps  map[string]float64 `json:"mbps"`
	// VpndRSSMiB is the daemon's RSS right after this round's transfer
	// through it.
	VpndRSSMiB float64 `json:"vpndRssAfterRunosMiB"`
	RunosStock float64 `json:"runosVsStock"`
	RunosBare  float64 `json:"runosVsBare"`
	StockBare  float64 `json:"stockVsBare"`
	// Upstream wireguard-go built from the module version in go.mod.
	RunosUpstream float64 `json:"runosVsUpstream"`
	UpstreamBare  float64 `json:"upstreamVsBare"`
}

// BenchmarkLabThroughput is issue 2's third number with both ratios: TCP
// from the laptop to ky3-n1 with iperf3 over the same LAN path three ways
// — through the RunOS tunnel (runos vpnd ↔ runos-gateway), through a pair
// of Debian's stock wireguard-go configured by wg on the same two hosts,
// through a pair of upstream wireguard-go built from the module version
// the project uses (the same device code without the project's Bind,
// relay and TUN setup around it: issue 24's runos/upstream ≥ 1.0),
// and over the bare veth (the ceiling) — RUNOS_BENCH_TPUT_ROUNDS rounds
// (default 3) of RUNOS_BENCH_IPERF_SECONDS each (default 3), the order
// rotated every round so that no path always goes first. The ratios are
// taken within each round, so they compare paths under the same load of
// the shared machine; the spread across rounds is the noise.
//
// It also records what the traffic leaves in the daemon: its RSS right
// after each transfer through it, and after the rounds one more transfer
// through the tunnel followed by RUNOS_BENCH_IDLE_SECONDS (default 10) of
// idle with the RSS read every second (the daemon gives memory back once
// the tunnel goes quiet, vpnd/trim.go).
//
// RUNOS_BENCH_PERF=<dir> profiles the whole machine (perf record -a -g)
// during the last round's runos and upstream transfers into
// <dir>/runos.data and <dir>/upstream.data. RUNOS_BENCH_SYSCALLS=<dir>
// counts their system calls and context switches per program into
// <dir>/runos.csv and <dir>/upstream.csv and logs them per GB carried.
// RUNOS_BENCH_TPUT_PATHS=runos,upstream measures only those paths (default
// all four): an A/B of two builds needs only the ratio, in more rounds.
func BenchmarkLabThroughput(b *testing.B) { fixedWork(b, benchThroughput) }

func benchThroughput(b *testing.B, m *metrics) {
	netnstest.Require(b, "iperf3")
	rounds := envInt(b, "RUNOS_BENCH_TPUT_ROUNDS", 3)
	secs := envInt(b, "RUNOS_BENCH_IPERF_SECONDS", 3)
	idle := envInt(b, "RUNOS_BENCH_IDLE_SECONDS", 10)
	w := newWorld(b, 1)
	res := w.newResult("lab-throughput", fmt.Sprintf(
		"RUNOS_BENCH_TPUT_ROUNDS=%d RUNOS_BENCH_IPERF_SECONDS=%d RUNOS_BENCH_IDLE_SECONDS=%d go test ./bench/labbench/ -run '^$' -bench '^BenchmarkLabThroughput$' -timeout 30m",
		rounds, secs, idle))
	res.Params["rounds"], res.Params["iperfSeconds"], res.Params["idleSeconds"] = rounds, secs, idle
	laptop := w.env.Client.Host
	ky3 := w.upOnKy3(laptop)

	// The stock pair on the same two hosts, its own subnet and port, over
	// the same LAN address the laptop dials ky3 at.
	srv := w.stockPeer("ky3-n1", ifaceName("wgs"), "10.99.0.1/24", 51998)
	cli := w.stockPeer(laptop, ifaceName("wgs"), "10.99.0.2/24", 0)
	w.must("ky3-n1", nil, "wg", "set", srv.iface, "peer", cli.pub(), "allowed-ips", "10.99.0.2/32")
	w.must(laptop, nil, "wg", "set", cli.iface, "peer", srv.pub(), "allowed-ips", "10.99.0.0/24",
		"endpoint", "10.77.0.21:51998", "persistent-keepalive", "1")
	w.must(laptop, nil, "ping", "-c", "1", "-W", "5", "10.99.0.1")
	usrv := w.upstreamPeer("ky3-n1", ifaceName("wgu"), "10.97.0.1/24", 51997)
	ucli := w.upstreamPeer(laptop, ifaceName("wgu"), "10.97.0.2/24", 0)
	w.must("ky3-n1", nil, "wg", "set", usrv.iface, "peer", ucli.pub(), "allowed-ips", "10.97.0.2/32")
	w.must(laptop, nil, "wg", "set", ucli.iface, "peer", usrv.pub(), "allowed-ips", "10.97.0.0/24",
		"endpoint", "10.77.0.21:51997", "persistent-keepalive", "1")
	w.must(laptop, nil, "ping", "-c", "1", "-W", "5", "10.97.0.1")

	w.iperfServer(laptop)

	paths := pickPaths(b, []tputPath{{"bare", "10.77.0.21"}, {"stock", "10.99.0.1"}, {"upstream", "10.97.0.1"}, {"runos", ky3.Server.Address}})
	perfDir, sysDir := os.Getenv("RUNOS_BENCH_PERF"), os.Getenv("RUNOS_BENCH_SYSCALLS")
	transfer := func(name, addr string, last bool) float64 {
		if perfDir != "" && last && (name == "runos" || name == "upstream") {
			defer w.perfDuring(filepath.Join(perfDir, name+".data"), secs)()
		}
		counted := sysDir != "" && last && (name == "runos" || name == "upstream")
		var wait func()
		if counted {
			wait = w.syscallsDuring(filepath.Join(sysDir, name+".csv"), secs)
		}
		out := w.must(laptop, nil, "iperf3", "-c", addr, "-t", strconv.Itoa(secs), "-J")
		v, err := IperfMbps([]byte(out))
		if err != nil {
			b.Fatalf("iperf3 to %s (%s): %v", addr, name, err)
		}
		if counted {
			wait()
			counts, err := syscallCounts(filepath.Join(sysDir, name+".csv"))
			if err != nil {
				b.Fatalf("RUNOS_BENCH_SYSCALLS: %v", err)
			}
			b.Logf("system calls and switches during the %s transfer (%.0f Mbit/s):\n%s", name, v,
				syscallTable(counts, v*float64(secs)/8/1000, "runos", "wireguard-go", "iperf3"))
		}
		return v
	}
	vpndMiB := func() float64 { rss, _ := w.rss(laptop, "vpnd"); return mib(rss) }
	series := map[string][]float64{}
	var all []throughputRound
	for i := range rounds {
		r := throughputRound{N: i + 1, Mbps: map[string]float64{}}
		for j := range paths {
			p := paths[(i+j)%len(paths)]
			r.Order = append(r.Order, p.name)
			v := transfer(p.name, p.addr, i == rounds-1)
			if p.name == "runos" {
				r.VpndRSSMiB = vpndMiB()
				series["vpnd-rss-after-runos-MiB"] = append(series["vpnd-rss-after-runos-MiB"], r.VpndRSSMiB)
			}
			r.Mbps[p.name] = v
			series[p.name+"-mbps"] = append(series[p.name+"-mbps"], v)
		}
		ratio := func(key, a, b string, to *float64) {
			if r.Mbps[a] > 0 && r.Mbps[b] > 0 {
				*to = r.Mbps[a] / r.Mbps[b]
				series[key] = append(series[key], *to)
			}
		}
		ratio("runos-vs-stock", "runos", "stock", &r.RunosStock)
		ratio("runos-vs-bare", "runos", "bare", &r.RunosBare)
		ratio("stock-vs-bare", "stock", "bare", &r.StockBare)
		ratio("runos-vs-upstream", "runos", "upstream", &r.RunosUpstream)
		ratio("upstream-vs-bare", "upstream", "bare", &r.UpstreamBare)
		all = append(all, r)
		if testing.Verbose() {
			b.Logf("round %d %v: runos %.0f, upstream %.0f, stock %.0f, bare %.0f Mbit/s; runos/upstream %.2f, runos/stock %.2f, runos/bare %.3f",
				r.N, r.Order, r.Mbps["runos"], r.Mbps["upstream"], r.Mbps["stock"], r.Mbps["bare"], r.RunosUpstream, r.RunosStock, r.RunosBare)
		}
	}
	for _, k := range []string{"runos-mbps", "upstream-mbps", "stock-mbps", "bare-mbps", "runos-vs-upstream", "runos-vs-stock", "runos-vs-bare",
		"upstream-vs-bare", "stock-vs-bare", "vpnd-rss-after-runos-MiB"} {
		if len(series[k]) == 0 {
			continue // a path left out by RUNOS_BENCH_TPUT_PATHS
		}
		s := res.AddSamples(k, series[k])
		b.Logf("%-15s n=%d  median %9.3f  min %9.3f  max %9.3f", k, s.N, s.P50, s.Min, s.Max)
	}
	res.Detail = all
	// What bulk traffic leaves resident: wireguard-go's batch buffers are
	// allocated at start and become resident as packets fill them.
	rss, hwm := w.rss(laptop, "vpnd")
	grss, _ := w.rss("ky3-n1", "gateway")
	res.Values["vpnd-rss-after-iperf-MiB"], res.Values["vpnd-hwm-MiB"], res.Values["ky3-n1-gateway-rss-after-iperf-MiB"] = mib(rss), mib(hwm), mib(grss)
	b.Logf("after the transfers: vpnd RSS %.1f MiB (peak %.1f), ky3-n1's gateway %.1f MiB", mib(rss), mib(hwm), mib(grss))

	// One more transfer through the tunnel, then idle: how long the daemon
	// holds what the burst left: read as soon as iperf3 returns, then
	// every second.
	lastMbps := transfer("runos", ky3.Server.Address, false)
	idleRSS, underAt := w.rssSettling(laptop, idle, underTarget)
	res.Values["vpnd-rss-after-last-runos-MiB"], res.Values["last-runos-mbps"] = idleRSS[0], lastMbps
	res.Values["vpnd-rss-under-30MB-after-s"] = underAt // -1: never, within the idle time
	res.Samples["vpnd-rss-idle-MiB"] = idleRSS          // one a second, the first right after the transfer
	res.Values[fmt.Sprintf("vpnd-rss-idle-%ds-MiB", idle)] = idleRSS[idle]
	grss, _ = w.rss("ky3-n1", "gateway")
	res.Values[fmt.Sprintf("ky3-n1-gateway-rss-idle-%ds-MiB", idle)] = mib(grss)
	under := fmt.Sprintf("under 30 MB after %v s", res.Values["vpnd-rss-under-30MB-after-s"])
	if res.Values["vpnd-rss-under-30MB-after-s"] < 0 {
		under = fmt.Sprintf("not under 30 MB within %d s", idle)
	}
	b.Logf("one more transfer through the tunnel (%.0f Mbit/s): vpnd RSS %.1f MiB right after, %.1f MiB %d s later (every second: %.1f); %s",
		lastMbps, idleRSS[0], idleRSS[idle], idle, idleRSS, under)
	// The daemon's collections over the whole run (all its transfers):
	// what its GC pacing (vpnd/gc.go) cost while packets flowed.
	hs := w.daemonHeap(laptop)
	res.Values["vpnd-memstats-end-NumGC"], res.Values["vpnd-memstats-end-NumForcedGC"] = float64(hs["NumGC"]), float64(hs["NumForcedGC"])
	b.Logf("vpnd over the run: %d collections (%d of them forced: trims, this reading)", hs["NumGC"], hs["NumForcedGC"])
	res.Notes = append(res.Notes,
		"vpnd-memstats-end-*: the daemon's runtime.MemStats at the end (its /v1/debug/pprof/heap?gc=1&debug=1, which collects once more): NumGC counts every collection of the run, the transfers' included",
		"one TCP stream, laptop → ky3-n1, iperf3 -t seconds; Mbit/s as the receiver saw them",
		"runos: to the VPN server address through wg1 (runos vpnd) and wgvpn (runos-gateway); stock: Debian's wireguard-go on both hosts configured by wg; upstream: wireguard-go built from the module version in go.mod on both hosts, configured by wg; bare: the LAN veth",
		"both ends of every tunnel run on the same 2 vCPUs, so a tunnel's rate is bounded by the CPU of two userspace WireGuard processes, not by the link",
		"vpnd-rss-after-runos-MiB: the daemon's VmRSS right after each round's transfer through it; vpnd-rss-idle-MiB: after one more such transfer, every second for idleSeconds (-1 in vpnd-rss-under-30MB-after-s: not within them)")
	w.save(res)
	for _, k := range [][2]string{{"runos-mbps", "runos-mbps"}, {"upstream-mbps", "upstream-mbps"}, {"stock-mbps", "stock-mbps"}, {"bare-mbps", "bare-mbps"},
		{"runos-vs-upstream", "runos/upstream"}, {"runos-vs-stock", "runos/stock"}, {"runos-vs-bare", "runos/bare"}} {
		if s, ok := res.Summaries[k[0]]; ok {
			m.add(s.P50, k[1])
		}
	}
	m.add(res.Summaries["vpnd-rss-after-runos-MiB"].Max, "vpnd-rss-after-runos-max-MiB")
	m.add(idleRSS[idle], fmt.Sprintf("vpnd-rss-idle-%ds-MiB", idle))
}

type tputPath struct{ name, addr string }

// pickPaths is all, or those RUNOS_BENCH_TPUT_PATHS names (runos always:
// the daemon's memory readings follow its transfers).
func pickPaths(b *testing.B, all []tputPath) []tputPath {
	v := os.Getenv("RUNOS_BENCH_TPUT_PATHS")
	if v == "" {
		return all
	}
	want := map[string]bool{"runos": true}
	for _, n := range strings.Split(v, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []tputPath
	for _, p := range all {
		if want[p.name] {
			out = append(out, p)
			delete(want, p.name)
		}
	}
	for n := range want {
		b.Fatalf("RUNOS_BENCH_TPUT_PATHS: no path %q (bare, stock, upstream, runos)", n)
	}
	return out
}

// underTarget is issue 2's 30 MB in MiB.
const underTarget = 30e6 / (1 << 20)
