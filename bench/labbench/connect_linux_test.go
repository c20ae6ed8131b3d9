//go:build linux

package labbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/vpnd/localapi"
)

// handshakeSpacing separates rounds that handshake with the same server
// again: a WireGuard responder drops an initiation from a peer within
// 20 ms of its last one (flood protection), which no user reconnecting
// could hit but a tight loop would, and would then measure the retry.
const handshakeSpacing = 30 * time.Millisecond

// lostInitiation: a handshake this late (a LAN round trip is ~1 ms) means
// the first initiation was lost — it reached the gateway before the
// gateway had added the device — and the daemon's first re-try (100 ms
// after the peer was configured) made it.
const lostInitiation = 90 * time.Millisecond

// connectRound is one round of connecting xym.
type connectRound struct {
	Via string `json:"via"` // api (POST /v1/connect) or cli (runos vpn connect)
	// StatusMs: from the start to the watch stream showing xym with peerUp.
	StatusMs float64 `json:"statusMs"`
	// HandshakeMs: from the start to the handshake, as wg1 stamped it.
	HandshakeMs float64 `json:"handshakeMs"`
	WallMs      float64 `json:"wallMs,omitempty"`     // cli: the command's whole run, nsenter included
	ReportedMs  float64 `json:"reportedMs,omitempty"` // cli: what it printed ("Connected in N ms.")
}

// BenchmarkLabConnect is issue 2's first two numbers, in a lab: with a
// valid session and ky3 connected, xym is disconnected and connected again
// RUNOS_BENCH_ROUNDS times (default 50) through the daemon's local API,
// then as many times with the real `runos vpn connect xym`; each round
// runs from the request to the daemon's watch stream showing xym with
// peerUp. Every round is a fresh join and handshake: before it, xym's
// gateway has dropped the device. Then the floors the connect cannot beat
// (a control round trip, a bare WireGuard handshake, the network's round
// trip, starting the CLI), and the daemon's memory with both clusters
// connected after traffic through each.
func BenchmarkLabConnect(b *testing.B) { fixedWork(b, benchConnect) }

func benchConnect(b *testing.B, m *metrics) {
	rounds := envInt(b, "RUNOS_BENCH_ROUNDS", 50)
	w := newWorld(b, 1)
	res := w.newResult("lab-connect", fmt.Sprintf(
		"RUNOS_BENCH_ROUNDS=%d go test ./bench/labbench/ -run '^$' -bench '^BenchmarkLabConnect$' -timeout 30m", rounds))
	res.Params["rounds"], res.Params["handshakeSpacing"] = rounds, handshakeSpacing.String()
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	f := w.follow(laptop)
	w.waitEach([]*Follower{f}, "ky3 up", 30*time.Second, UpOn("ky3", ""))
	d := w.daemon(laptop)
	st, err := d.Status(w.ctx)
	if err != nil {
		b.Fatal(err)
	}
	device := st.Tunnel.PublicKey
	rss, _ := w.rss(laptop, "vpnd")
	res.Values["vpnd-rss-one-cluster-MiB"] = mib(rss)

	// Memory with both clusters connected, before any churn.
	if _, err := d.Connect(w.ctx, "xym"); err != nil {
		b.Fatal(err)
	}
	fresh := w.rssBoth(f)
	anon0, file0 := w.rssSplit(laptop, "vpnd")
	res.Values["vpnd-rss-anon-two-clusters-MiB"], res.Values["vpnd-rss-file-two-clusters-MiB"] = mib(anon0), mib(file0)
	res.Values["vpnd-rss-two-clusters-MiB"] = mib(fresh)

	var all []connectRound
	for range rounds {
		w.leaveXym(d, f, device)
		mark, t0 := f.Mark(), time.Now()
		if _, err := d.Connect(w.ctx, "xym"); err != nil {
			b.Fatal(err)
		}
		all = append(all, w.connected(f, mark, t0, "api"))
	}
	for range rounds {
		w.leaveXym(d, f, device)
		mark, t0 := f.Mark(), time.Now()
		out := w.must(laptop, nil, "runos", "vpn", "connect", "xym")
		wall := time.Since(t0)
		r := w.connected(f, mark, t0, "cli")
		r.WallMs = Ms(wall)
		r.ReportedMs, _ = ReportedConnectMs(out)
		all = append(all, r)
	}
	series := map[string][]float64{}
	for _, r := range all {
		series[r.Via+"-status-ms"] = append(series[r.Via+"-status-ms"], r.StatusMs)
		series[r.Via+"-handshake-ms"] = append(series[r.Via+"-handshake-ms"], r.HandshakeMs)
		series[r.Via+"-status-lag-ms"] = append(series[r.Via+"-status-lag-ms"], r.StatusMs-r.HandshakeMs)
		if r.HandshakeMs >= lostInitiation.Seconds()*1000 {
			res.Values[r.Via+"-rounds-first-initiation-lost"]++
		}
		if r.Via == "cli" {
			series["cli-wall-ms"] = append(series["cli-wall-ms"], r.WallMs)
			series["cli-reported-ms"] = append(series["cli-reported-ms"], r.ReportedMs)
		}
	}
	for _, k := range []string{"api-status-ms", "api-handshake-ms", "cli-status-ms", "cli-wall-ms", "cli-reported-ms", "cli-handshake-ms", "api-status-lag-ms", "cli-status-lag-ms"} {
		logSummary(b, k, res.AddSamples(k, series[k]), k == "api-status-ms" || k == "cli-status-ms")
	}
	res.Detail = all

	w.floors(res, rounds)

	// Memory again after all those connects (the last round left xym up).
	after := w.rssBoth(f)
	_, hwm := w.rss(laptop, "vpnd")
	res.Values["vpnd-rss-two-clusters-after-rounds-MiB"], res.Values["vpnd-hwm-MiB"] = mib(after), mib(hwm)
	anon, file := w.rssSplit(laptop, "vpnd")
	res.Values["vpnd-rss-anon-after-rounds-MiB"], res.Values["vpnd-rss-file-after-rounds-MiB"] = mib(anon), mib(file)
	settled, underAt := w.rssSettling(laptop, connectIdleSeconds, 25e6/(1<<20))
	anonIdle, fileIdle := w.rssSplit(laptop, "vpnd")
	res.Values["vpnd-rss-anon-after-rounds-idle-MiB"], res.Values["vpnd-rss-file-after-rounds-idle-MiB"] = mib(anonIdle), mib(fileIdle)
	b.Logf("vpnd RSS after the rounds: anonymous %.1f MiB, file %.1f MiB; %d s later %.1f and %.1f (before the rounds: %.1f and %.1f)",
		mib(anon), mib(file), connectIdleSeconds, mib(anonIdle), mib(fileIdle), mib(anon0), mib(file0))
	res.Samples["vpnd-rss-after-rounds-idle-MiB"] = settled
	res.Values[fmt.Sprintf("vpnd-rss-after-rounds-idle-%ds-MiB", connectIdleSeconds)] = settled[len(settled)-1]
	res.Values["vpnd-rss-after-rounds-under-25MB-after-s"] = underAt
	b.Logf("vpnd RSS after the rounds, every second for %d s: %.1f (under 25 MB after %v s; -1: not within them)", connectIdleSeconds, settled, underAt)
	// The GC's state beside the RSS: what its pacing (vpnd/gc.go) left.
	hs := w.daemonHeap(laptop)
	for _, k := range []string{"NextGC", "HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "NumGC"} {
		res.Values["vpnd-memstats-after-rounds-"+k] = float64(hs[k])
	}
	b.Logf("vpnd after the rounds (after a GC): NextGC %.1f MiB, HeapAlloc %.1f, HeapInuse %.1f, HeapIdle %.1f, HeapReleased %.1f MiB; %d collections",
		mib(int(hs["NextGC"]>>10)), mib(int(hs["HeapAlloc"]>>10)), mib(int(hs["HeapInuse"]>>10)), mib(int(hs["HeapIdle"]>>10)), mib(int(hs["HeapReleased"]>>10)), hs["NumGC"])
	for _, p := range []struct{ host, name string }{{"xym-n1", "gateway"}, {"ky3-n1", "gateway"}, {"control", "control"}} {
		r, _ := w.rss(p.host, p.name)
		res.Values[p.host+"-"+p.name+"-rss-MiB"] = mib(r)
	}
	b.Logf("vpnd RSS: %.1f MiB with ky3; %.1f MiB with ky3 and xym after traffic through each; %.1f MiB after %d more connects of xym (peak %.1f MiB)",
		mib(rss), mib(fresh), mib(after), 2*rounds, mib(hwm))
	res.Notes = append(res.Notes,
		"api rounds: POST /v1/connect on the daemon's socket to its /v1/watch stream showing xym with peerUp",
		"cli rounds: `runos vpn connect xym` run in the laptop through nsenter; status-ms from just before the exec to the watch stream showing peerUp, wall-ms to the command's exit",
		"before every round xym is disconnected and the test waits until xym-n1's gateway (read with the stock wg) has dropped the device, then 30 ms (WireGuard's flood protection)",
		"floor-control-rtt-warm-ms: GET /v1/me over a kept HTTP/2 connection from the laptop (what the daemon holds to control); floor-control-rtt-cold-ms: the same with a new TCP+TLS connection each time",
		"floor-handshake-ms: a bare wireguard-go device in the laptop namespace to Debian's wireguard-go on xym-n1 over the same path, from configuring the peer to the completed handshake",
		"api/cli-rounds-first-initiation-lost: rounds whose handshake came 90 ms or more after the start, i.e. at the daemon's first re-try (100 ms) because the first initiation reached the gateway before the gateway had the device",
		"api/cli-status-lag-ms: status-ms minus handshake-ms, how long after the handshake the daemon's status showed it",
		"floor-cli-exec-ms: `runos version` through nsenter in the laptop (process start plus one local API call)",
		"vpnd-rss-two-clusters-MiB: VmRSS of runos vpnd with ky3 and xym connected after 500 pings of 1200 bytes through each, before the rounds; vpnd-rss-two-clusters-after-rounds-MiB: the same after all the rounds",
		"vpnd-rss-after-rounds-idle-MiB: the daemon's VmRSS after those pings, every second while idle (the memory trim waits for a quiet tunnel); vpnd-rss-after-rounds-under-25MB-after-s: the first second under 25 MB, -1 if not within them",
		"vpnd-memstats-after-rounds-*: the daemon's runtime.MemStats (bytes; NumGC a count) from its /v1/debug/pprof/heap?gc=1&debug=1 after those readings, i.e. just after a forced collection")
	w.save(res)
	m.summary("api", res.Summaries["api-status-ms"])
	m.summary("cli", res.Summaries["cli-status-ms"])
	m.add(mib(fresh), "vpnd-RSS-MiB")
	m.add(mib(after), "vpnd-RSS-after-rounds-MiB")
}

func mib(kb int) float64 { return float64(kb) / 1024 }

// connectIdleSeconds is how long the connect benchmark watches the
// daemon's memory settle after its rounds: past the trim's quiet time.
const connectIdleSeconds = 12

// rssSettling reads the daemon's VmRSS every second for secs seconds (the
// first at once) and returns the readings in MiB and the first second at
// which it was under underMiB (-1: never).
func (w *world) rssSettling(host string, secs int, underMiB float64) ([]float64, float64) {
	start := time.Now()
	var out []float64
	underAt := -1.0
	for k := 0; k <= secs; k++ {
		time.Sleep(time.Until(start.Add(time.Duration(k) * time.Second)))
		r, _ := w.rss(host, "vpnd")
		out = append(out, mib(r))
		if mib(r) < underMiB && underAt < 0 {
			underAt = float64(k)
		}
	}
	return out, underAt
}

// rssBoth waits for ky3 and xym up on the laptop, sends traffic through
// each (pings of 1200 bytes) and returns the daemon's resident memory.
func (w *world) rssBoth(f *Follower) int {
	w.b.Helper()
	both := func(s *localapi.Status) bool { return UpOn("ky3", "")(s) && UpOn("xym", "")(s) }
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	if _, err := f.Until(ctx, both); err != nil {
		w.b.Fatal(err)
	}
	laptop := w.env.Client.Host
	for _, addr := range []string{"100.100.1.1", "100.100.2.1"} {
		w.must(laptop, nil, "ping", "-q", "-c", "500", "-i", "0.002", "-s", "1200", addr)
	}
	rss, _ := w.rss(laptop, "vpnd")
	return rss
}

// leaveXym disconnects xym and waits until the daemon shows it down and
// xym's gateway no longer has the device as a peer (so the next connect is
// a fresh join and handshake), then WireGuard's flood spacing.
func (w *world) leaveXym(d *localapi.Client, f *Follower, device string) {
	w.b.Helper()
	if _, err := d.Disconnect(w.ctx, "xym"); err != nil && !strings.Contains(err.Error(), "not") {
		w.b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	if _, err := f.Until(ctx, Down("xym")); err != nil {
		w.b.Fatal(err)
	}
	w.waitFor(10*time.Second, "xym-n1 dropping the device", func() bool {
		out, _, err := w.run("xym-n1", nil, "wg", "show", "all", "peers")
		return err == nil && !strings.Contains(out, device)
	})
	time.Sleep(handshakeSpacing)
}

// connected waits for xym up after mark and returns the round's times.
func (w *world) connected(f *Follower, mark int, t0 time.Time, via string) connectRound {
	w.b.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	e, err := f.Wait(ctx, mark, UpOn("xym", ""))
	if err != nil {
		w.b.Fatalf("connect xym (%s): %v", via, err)
	}
	c, _ := Cluster(&e.Status, "xym")
	return connectRound{Via: via, StatusMs: Ms(e.At.Sub(t0)), HandshakeMs: Ms(c.LastHandshake.Sub(t0))}
}

// floors measures what a connect cannot beat, from the same laptop over
// the same paths: a control round trip (warm and cold), the network's
// round trip to xym-n1, a bare WireGuard handshake with xym-n1, and
// starting the CLI.
func (w *world) floors(res *Result, rounds int) {
	b := w.b
	laptop := w.env.Client.Host
	warm := w.apiClient(laptop, w.env.OperatorToken)
	if _, err := warm.Me(w.ctx); err != nil {
		b.Fatalf("GET /v1/me: %v", err)
	}
	cold, err := w.lab.APIClient(laptop, w.env.OperatorToken) // a new connection per request
	if err != nil {
		b.Fatal(err)
	}
	var warmDs, coldDs, execDs []time.Duration
	for range rounds {
		t0 := time.Now()
		if _, err := warm.Me(w.ctx); err != nil {
			b.Fatal(err)
		}
		warmDs = append(warmDs, time.Since(t0))
		t0 = time.Now()
		if _, err := cold.Me(w.ctx); err != nil {
			b.Fatal(err)
		}
		coldDs = append(coldDs, time.Since(t0))
	}
	for range min(rounds, 20) {
		t0 := time.Now()
		w.must(laptop, nil, "runos", "version")
		execDs = append(execDs, time.Since(t0))
	}
	logSummary(b, "floor-control-rtt-warm-ms", res.AddDurations("floor-control-rtt-warm-ms", warmDs), true)
	logSummary(b, "floor-control-rtt-cold-ms", res.AddDurations("floor-control-rtt-cold-ms", coldDs), false)
	logSummary(b, "floor-cli-exec-ms", res.AddDurations("floor-cli-exec-ms", execDs), true)

	ping := PingTimes(w.must(laptop, nil, "ping", "-c", "50", "-i", "0.01", "198.51.100.31"))
	if len(ping) == 0 {
		b.Fatal("ping to xym-n1: no replies")
	}
	logSummary(b, "floor-ping-rtt-ms", res.AddSamples("floor-ping-rtt-ms", ping), false)

	hs := w.probeHandshakes(rounds)
	logSummary(b, "floor-handshake-ms", res.AddSamples("floor-handshake-ms", hs), true)
}

// probeHandshakes runs this test binary in the laptop as the handshake
// probe (ProbeConfig) against Debian's wireguard-go on xym-n1.
func (w *world) probeHandshakes(rounds int) []float64 {
	b := w.b
	srv := w.stockPeer("xym-n1", ifaceName("wgf"), "10.98.0.1/24", 51999)
	key, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		b.Fatal(err)
	}
	w.must("xym-n1", nil, "wg", "set", srv.iface, "peer", key.PublicKey().String(), "allowed-ips", "10.98.0.2/32")
	cfg, _ := json.Marshal(ProbeConfig{Interface: ifaceName("wgp"), PrivateKey: key.String(), PeerPublicKey: srv.pub(),
		Endpoint: netip.MustParseAddrPort("198.51.100.31:51999"), AllowedIP: netip.MustParsePrefix("10.98.0.1/32"),
		Rounds: rounds, Spacing: handshakeSpacing, Timeout: 10 * time.Second})
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	out := w.must(w.env.Client.Host, []string{probeEnv + "=" + string(cfg)}, exe)
	var pr ProbeResult
	if err := json.Unmarshal([]byte(out), &pr); err != nil || len(pr.HandshakesMs) != rounds {
		b.Fatalf("handshake probe: %v (%d samples)\n%s", err, len(pr.HandshakesMs), out)
	}
	return pr.HandshakesMs
}
