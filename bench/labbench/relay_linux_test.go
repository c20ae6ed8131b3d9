//go:build linux

package labbench

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// BenchmarkLabRelay is issue 14's numbers, in one lab:
//
//   - connect: `runos vpn connect ky3` (the CLI process, from its start) to
//     the daemon's watch stream showing ky3 with peerUp, RUNOS_BENCH_ROUNDS
//     times (default 10) with UDP to the nodes blocked (over the relay) and
//     as many with UDP open (direct), alternating; the fallback's cost when
//     UDP works is the direct connect against BenchmarkLabConnect's on a
//     build without the relay (docs/performance.md);
//   - throughput: one TCP stream (iperf3) from a laptop to ky3-n1 through
//     the tunnel over the relay (client2, its UDP blocked), through the
//     tunnel directly (client) and over the bare veth,
//     RUNOS_BENCH_TPUT_ROUNDS rounds (default 3) of RUNOS_BENCH_IPERF_SECONDS
//     (default 3), the order rotated each round;
//   - gap: a ping every 20 ms from client through the tunnel while UDP is
//     blocked (the longest stretch without a reply until it comes back over
//     the relay) and unblocked again (until it is back on UDP),
//     RUNOS_BENCH_GAP_ROUNDS times (default 5).
func BenchmarkLabRelay(b *testing.B) { fixedWork(b, benchRelay) }

func benchRelay(b *testing.B, m *metrics) {
	netnstest.Require(b, "iperf3", "nft", "ping")
	rounds := envInt(b, "RUNOS_BENCH_ROUNDS", 10)
	tput := envInt(b, "RUNOS_BENCH_TPUT_ROUNDS", 3)
	secs := envInt(b, "RUNOS_BENCH_IPERF_SECONDS", 3)
	gaps := envInt(b, "RUNOS_BENCH_GAP_ROUNDS", 5)
	w := newWorld(b, 2)
	res := w.newResult("lab-relay", fmt.Sprintf(
		"RUNOS_BENCH_ROUNDS=%d RUNOS_BENCH_TPUT_ROUNDS=%d RUNOS_BENCH_IPERF_SECONDS=%d RUNOS_BENCH_GAP_ROUNDS=%d go test ./bench/labbench/ -run '^$' -bench '^BenchmarkLabRelay$' -timeout 30m",
		rounds, tput, secs, gaps))
	res.Params["rounds"], res.Params["tputRounds"], res.Params["iperfSeconds"], res.Params["gapRounds"] = rounds, tput, secs, gaps
	ctx := context.Background()
	direct, relayed := w.env.Clients[0].Host, w.env.Clients[1].Host
	w.upAll("ky3")
	fd, fr := w.follow(direct), w.follow(relayed)
	w.waitEach([]*Follower{fd, fr}, "ky3 up on n1", 30*time.Second, UpOn("ky3", "n1"))
	onPath := func(path string) func(*localapi.Status) bool {
		return func(s *localapi.Status) bool {
			c, ok := Cluster(s, "ky3")
			return UpOn("ky3", "n1")(s) && ok && c.Path == path
		}
	}

	// Connect to peerUp, relayed and direct, alternating.
	connect := func(host string, f *Follower, path string) float64 {
		w.must(host, nil, "runos", "vpn", "disconnect", "ky3")
		if _, err := f.Until(w.ctx, func(s *localapi.Status) bool { c, _ := Cluster(s, "ky3"); return !c.PeerUp }); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		w.must(host, nil, "runos", "vpn", "connect", "ky3")
		cctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
		defer cancel()
		e, err := f.Until(cctx, onPath(path))
		if err != nil {
			b.Fatalf("connect ky3 over %s: %v", path, err)
		}
		return float64(e.At.Sub(start).Microseconds()) / 1000
	}
	var overRelay, overUDP []float64
	for range rounds {
		if err := w.lab.Block(ctx, direct, lab.BlockUDP); err != nil {
			b.Fatal(err)
		}
		overRelay = append(overRelay, connect(direct, fd, localapi.PathRelay))
		if err := w.lab.Unblock(ctx, direct); err != nil {
			b.Fatal(err)
		}
		overUDP = append(overUDP, connect(direct, fd, localapi.PathDirect))
	}
	sr := res.AddSamples("connect-udp-blocked-ms", overRelay)
	sd := res.AddSamples("connect-udp-open-ms", overUDP)
	logSummary(b, "connect, UDP blocked (ms)", sr, true)
	logSummary(b, "connect, UDP open (ms)", sd, true)

	// Throughput: the relay (client2, UDP blocked), direct (client), bare.
	e, _ := fd.Latest()
	ky3, _ := Cluster(&e.Status, "ky3")
	if err := w.lab.Block(ctx, relayed, lab.BlockUDP); err != nil {
		b.Fatal(err)
	}
	// An idle tunnel cannot tell its path died: some traffic tells it.
	_, _, _ = w.run(relayed, nil, "ping", "-c", "4", "-i", "0.5", "-W", "1", ky3.Server.Address)
	w.waitEach([]*Follower{fr}, "client2 relayed", 30*time.Second, onPath(localapi.PathRelay))
	w.waitEach([]*Follower{fd}, "client direct", 30*time.Second, onPath(localapi.PathDirect))
	w.iperfServer(direct)
	paths := []struct{ name, host, addr string }{{"bare", direct, "10.77.0.21"}, {"direct", direct, ky3.Server.Address}, {"relay", relayed, ky3.Server.Address}}
	series := map[string][]float64{}
	for i := range tput {
		for j := range paths {
			p := paths[(i+j)%len(paths)]
			out := w.iperfClient(p.host, p.addr, secs)
			v, err := IperfMbps([]byte(out))
			if err != nil {
				b.Fatalf("iperf3 %s: %v", p.name, err)
			}
			series[p.name+"-mbps"] = append(series[p.name+"-mbps"], v)
		}
		n := len(series["relay-mbps"]) - 1
		series["relay-vs-direct"] = append(series["relay-vs-direct"], series["relay-mbps"][n]/series["direct-mbps"][n])
		series["relay-vs-bare"] = append(series["relay-vs-bare"], series["relay-mbps"][n]/series["bare-mbps"][n])
		series["direct-vs-bare"] = append(series["direct-vs-bare"], series["direct-mbps"][n]/series["bare-mbps"][n])
	}
	for _, k := range []string{"relay-mbps", "direct-mbps", "bare-mbps", "relay-vs-direct", "relay-vs-bare", "direct-vs-bare"} {
		s := res.AddSamples(k, series[k])
		b.Logf("%-16s n=%d  median %9.3f  min %9.3f  max %9.3f", k, s.N, s.P50, s.Min, s.Max)
	}
	if err := w.lab.Unblock(ctx, relayed); err != nil {
		b.Fatal(err)
	}

	// The gap in a ping stream when UDP goes and when it comes back.
	p := w.pingStream(direct, ky3.Server.Address)
	var down, up []float64
	for range gaps {
		p.waitMore(b, 25, 10*time.Second)
		t0 := time.Now()
		if err := w.lab.Block(ctx, direct, lab.BlockUDP); err != nil {
			b.Fatal(err)
		}
		w.waitEach([]*Follower{fd}, "relayed", 30*time.Second, onPath(localapi.PathRelay))
		p.waitMore(b, 25, 10*time.Second)
		down = append(down, float64(p.gapAfter(t0).Microseconds())/1000)
		t1 := time.Now()
		if err := w.lab.Unblock(ctx, direct); err != nil {
			b.Fatal(err)
		}
		w.waitEach([]*Follower{fd}, "direct", 30*time.Second, onPath(localapi.PathDirect))
		p.waitMore(b, 25, 10*time.Second)
		up = append(up, float64(p.gapAfter(t1).Microseconds())/1000)
	}
	p.stop()
	gd := res.AddSamples("ping-gap-udp-blocked-ms", down)
	gu := res.AddSamples("ping-gap-udp-back-ms", up)
	logSummary(b, "ping gap, UDP blocked (ms)", gd, true)
	logSummary(b, "ping gap, UDP back (ms)", gu, true)
	res.Notes = append(res.Notes,
		"connect: from the start of `runos vpn connect ky3` to the watch stream showing ky3 with peerUp on the expected path; the session was signed in before",
		"throughput: one TCP stream, laptop → ky3-n1; relay: client2 with UDP to the nodes blocked by nftables, WireGuard over WebSocket/TLS to ky3-n1:443; direct: client over UDP; bare: the LAN veth",
		"gap: ping -i 0.02 through the tunnel; the longest stretch without a reply from the block (unblock) to 25 replies after the path changed")
	w.save(res)
	m.summary("connect-blocked", sr)
	m.summary("connect-open", sd)
	m.add(res.Summaries["relay-mbps"].P50, "relay-mbps")
	m.add(res.Summaries["direct-mbps"].P50, "direct-mbps")
	m.add(res.Summaries["bare-mbps"].P50, "bare-mbps")
	m.add(gd.Max, "gap-blocked-max-ms")
	m.add(gu.Max, "gap-back-max-ms")
}

// iperfServer runs iperf3's server on ky3-n1 for the rest of the
// benchmark and returns once laptop reaches it over the LAN.
func (w *world) iperfServer(laptop string) {
	w.b.Helper()
	iperf, err := w.lab.Command(context.Background(), "ky3-n1", nil, "iperf3", "-s")
	if err != nil {
		w.b.Fatal(err)
	}
	if err := iperf.Start(); err != nil {
		w.b.Fatal(err)
	}
	w.b.Cleanup(func() { _ = iperf.Process.Signal(syscall.SIGTERM); _ = iperf.Wait() })
	w.waitFor(10*time.Second, "iperf3 listening on ky3-n1", func() bool {
		c, err := w.lab.Dial(w.ctx, laptop, "tcp", "10.77.0.21:5201")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// upOnKy3 brings ky3 up on laptop (signing in) and returns its status
// once it is up on n1.
func (w *world) upOnKy3(laptop string) localapi.ClusterStatus {
	w.b.Helper()
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	f := w.follow(laptop)
	w.waitEach([]*Follower{f}, "ky3 up on n1", 30*time.Second, UpOn("ky3", "n1"))
	e, _ := f.Latest()
	ky3, _ := Cluster(&e.Status, "ky3")
	return ky3
}

// iperfClient runs one iperf3 test from host to addr and returns its JSON
// report. The one server takes one test at a time and is slow to notice
// the end of the last (or of the readiness probe's connection): it then
// refuses ("busy", a reset control connection), and the test is tried
// again.
func (w *world) iperfClient(host, addr string, secs int, extra ...string) string {
	w.b.Helper()
	argv := append([]string{"iperf3", "-c", addr, "-t", strconv.Itoa(secs), "-J"}, extra...)
	for try := 0; ; try++ {
		out, _, err := w.run(host, nil, argv...)
		if _, perr := IperfMbps([]byte(out)); err == nil && perr == nil || try == 10 {
			return out // a failed test fails where its report is read
		}
		w.b.Logf("iperf3 to %s from %s: trying again: %v", addr, host, err)
		time.Sleep(500 * time.Millisecond) // the server's own pace: it says nothing when free
	}
}

// pings is a ping stream from a laptop with each reply's time.
type pings struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	at     []time.Time
}

var pingLine = regexp.MustCompile(`^\[(\d+)\.(\d+)\] \d+ bytes from`)

func (w *world) pingStream(host, addr string) *pings {
	w.b.Helper()
	ctx, cancel := context.WithCancel(w.ctx)
	cmd, err := w.lab.Command(ctx, host, nil, "ping", "-D", "-n", "-i", "0.02", addr)
	if err != nil {
		w.b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		w.b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.b.Fatal(err)
	}
	p := &pings{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := pingLine.FindStringSubmatch(sc.Text()); m != nil {
				sec, _ := strconv.ParseInt(m[1], 10, 64)
				frac, _ := strconv.ParseFloat("0."+m[2], 64)
				p.mu.Lock()
				p.at = append(p.at, time.Unix(sec, int64(frac*1e9)))
				p.mu.Unlock()
			}
		}
		_ = cmd.Wait()
	}()
	w.b.Cleanup(p.stop)
	return p
}

func (p *pings) stop() {
	p.cancel()
	<-p.done
}

func (p *pings) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.at)
}

// waitMore waits for n more replies.
func (p *pings) waitMore(b *testing.B, n int, timeout time.Duration) {
	b.Helper()
	want := p.count() + n
	deadline := time.Now().Add(timeout)
	for p.count() < want {
		if time.Now().After(deadline) {
			b.Fatalf("fewer than %d ping replies within %s", n, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gapAfter is the longest stretch without a reply that began after t.
func (p *pings) gapAfter(t time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, gap := t, time.Duration(0)
	for _, a := range p.at {
		if a.Before(t) {
			continue
		}
		gap = max(gap, a.Sub(prev))
		prev = a
	}
	return gap
}
