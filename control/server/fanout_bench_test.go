//go:build linux

package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/seed"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/sqlstore"
	"github.com/runos/vpn/control/token"
	"github.com/runos/vpn/internal/proccpu"
	"github.com/runos/vpn/internal/testcert"
	"github.com/runos/vpn/internal/testenv"
)

// BenchmarkMoveFanOut measures the push of one change, a move's switch, to
// RUNOS_FANOUT_DEVICES (default 10,000) simulated devices, each holding its
// DeviceMap long-poll on its own TCP connection (HTTPS, HTTP/1.1; HTTP/2
// with RUNOS_FANOUT_H2=1, as the daemon's client negotiates with control)
// to one control server on loopback with control.Run's timeouts. The
// devices live in a helper process (this test binary re-executed) so that
// the heap and RSS reported are control's alone. Each iteration is a real move through the API: the target reports
// listening (the commit that changes every device's map, from which the
// time is measured), every device's answer is timed on arrival, then the
// target reports every device's handshake and the move is done; the next
// iteration moves the server back.
//
// Run with a fixed count, since setting up 10,000 connections takes a while:
//
//	go test -run='^$' -bench=BenchmarkMoveFanOut -benchtime=5x ./control/server/
//
// Metrics: ms-all (commit to the last device's answer), ms-written (to
// control's last answer written), ms-p50 and ms-p99 (to the median and 99th
// percentile device); cpu-ms-control and cpu-ms-devices, the CPU time each
// process spent from the commit to the last answer (both share the
// machine's CPUs, so this says what part of a round is control's); and,
// with every long-poll parked, control's heap-MB (heap in use), stack-MB
// (goroutine stacks), goroutines, conns (connections open) and rss-MB
// (resident memory).
//
// With RUNOS_FANOUT_STREAM=1 each device holds a push stream instead
// (api.Client.WatchDeviceMap, docs/internals.md "Push"), on HTTP/1.1 or,
// with RUNOS_FANOUT_H2=1, HTTP/2. Per device it also reports control's
// cpu-us/dev (CPU per device per change) and heap-KB/dev, stack-KB/dev and
// rss-KB/dev (what each held device adds to control, over control before
// the devices connected; RSS after a GC that gives back what it freed,
// both times). More than 20,000 devices dial from several loopback
// addresses (the first 20,000 as the kernel chooses, then 127.0.0.2, .3, …,
// 20,000 each), for source ports. The first ones are not bound to
// 127.0.0.1: a bind before connect may take the port of a replica that
// BenchmarkMoveFanOutReplicas has just killed, and it could not come back.
//
// Knobs: RUNOS_FANOUT_PLAIN=1 serves plain HTTP (TLS's share);
// RUNOS_FANOUT_CPUPROFILE=<file> profiles control's CPU during each round
// (into <file>.<round>), RUNOS_FANOUT_HEAPPROFILE=<file> its heap with the
// polls parked.
func BenchmarkMoveFanOut(b *testing.B) {
	n := 10000
	if v := os.Getenv("RUNOS_FANOUT_DEVICES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	raiseNoFile(b, n+256) // a connection per device, and some to spare
	stream := os.Getenv("RUNOS_FANOUT_STREAM") == "1"
	ctx := context.Background()
	dir := b.TempDir()

	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "control.db"), sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	services, _ := pool.NewServices(netip.MustParsePrefix("100.100.0.0/16"))
	if _, err := seed.Import(ctx, st, testWorld(), seed.Options{Services: services, BcryptCost: 4, Now: time.Now()}); err != nil {
		b.Fatal(err)
	}
	tokens, keys := bulkDevices(b, st, n)
	var g uint64
	var vs map[string]uint64
	_ = st.View(ctx, func(r store.Reader) error {
		g, _ = r.GlobalVersion()
		vs, _ = r.AllTopicVersions()
		return nil
	})
	h := hub.New(g, vs)
	// The fan-out of each commit, to its last answer or stream event
	// written: for streams, control's share of a round.
	var fanMax atomic.Int64
	h.ObserveFanOut(func(d time.Duration) {
		for {
			old := fanMax.Load()
			if int64(d) <= old || fanMax.CompareAndSwap(old, int64(d)) {
				return
			}
		}
	})
	srv, err := New(Config{Store: st, Hub: h, Clock: clock.Real{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	// Count the device-map answers written, and when the last was, to tell
	// control's share of the fan-out from the helper's.
	var written, lastWrite atomic.Int64
	counting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.Handler().ServeHTTP(w, r)
		if strings.HasSuffix(r.URL.Path, "/map") {
			lastWrite.Store(time.Now().UnixNano())
			written.Add(1)
		}
	})
	ts := httptest.NewUnstartedServer(counting)
	// control.Run's timeouts: they arm a deadline per request.
	ts.Config.ReadHeaderTimeout, ts.Config.IdleTimeout = 10*time.Second, 2*time.Minute
	// 10,000 devices dialling at once on two CPUs: some handshakes outlast
	// that timeout and the device dials again. Counted, not logged.
	var failedHandshakes atomic.Int64
	ts.Config.ErrorLog = log.New(writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("TLS handshake error")) {
			failedHandshakes.Add(1)
		} else {
			os.Stderr.Write(p)
		}
		return len(p), nil
	}), "", 0)
	var conns atomic.Int64
	ts.Config.ConnState = func(_ net.Conn, cs http.ConnState) {
		switch cs {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			conns.Add(-1)
		}
	}
	tc := testcert.New(b) // ECDSA: cheaper handshakes than httptest's RSA, as a production certificate's
	certPEM := tc.CertPEM
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{tc.TLS(b)}, MinVersion: tls.VersionTLS12}
	h2 := os.Getenv("RUNOS_FANOUT_H2") == "1"
	ts.EnableHTTP2 = h2
	if os.Getenv("RUNOS_FANOUT_PLAIN") == "1" { // to see TLS's share
		ts.Start()
	} else {
		ts.StartTLS()
	}
	defer ts.Close()
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, certPEM, 0o600)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	op := &api.Client{BaseURL: ts.URL, Token: opToken, HTTP: hc}
	gw := func(nid string) *api.Client { return &api.Client{BaseURL: ts.URL, Token: enroll("ky3", nid), HTTP: hc} }
	nodeKeys := map[string]wgtypes.Key{"n1": mustKey(b), "n2": mustKey(b)}
	report := func(nid string, mapVersion uint64, hs []api.PeerHandshake) {
		if err := gw(nid).GatewayReport(ctx, api.GatewayReport{PublicKey: nodeKeys[nid].PublicKey().String(), Version: "bench",
			ServiceID: "wg-ky3", Listening: true, ListenPort: 32768, MapVersion: mapVersion, Handshakes: hs}); err != nil {
			b.Fatal(err)
		}
	}
	report("n1", 1<<40, nil)

	tokFile := filepath.Join(dir, "devices.txt")
	os.WriteFile(tokFile, []byte(strings.Join(tokens, "\n")), 0o600)
	// Control before any device: what each held device adds is measured
	// over this.
	var ms0 runtime.MemStats
	debug.FreeOSMemory() // a GC, and what it freed given back: RSS is what is live
	runtime.ReadMemStats(&ms0)
	rss0 := rssMB()
	helper := exec.Command(os.Args[0], "-test.run=^TestFanOutHelper$", "-test.v")
	helper.Env = append(os.Environ(), "RUNOS_FANOUT_HELPER=1", "RUNOS_FANOUT_H2="+strconv.FormatBool(h2), "RUNOS_FANOUT_URL="+ts.URL, "RUNOS_FANOUT_CA="+caFile, "RUNOS_FANOUT_TOKENS="+tokFile,
		"RUNOS_FANOUT_STREAM="+strconv.FormatBool(stream))
	stdin, _ := helper.StdinPipe()
	stdout, _ := helper.StdoutPipe()
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); helper.Process.Kill(); helper.Wait() }()
	lines := bufio.NewScanner(stdout)
	expect := func(prefix string) []string {
		for lines.Scan() {
			if f := strings.Fields(lines.Text()); len(f) > 0 && f[0] == prefix {
				return f[1:]
			}
		}
		b.Fatalf("helper ended before %q: %v", prefix, lines.Err())
		return nil
	}
	waitParked := func() {
		for !stream && h.Watchers() < n || stream && srv.Streams() < n {
			time.Sleep(5 * time.Millisecond)
		}
	}
	expect("started")
	waitParked()
	if k := failedHandshakes.Load(); k > 0 {
		b.Logf("setup: %d TLS handshakes failed (timed out) and were dialled again", k)
	}

	var all, p50, p99, srvAll, fan, ctlCPU, devCPU []float64
	var heap, stack, rss, goroutines, nconns float64
	var perDev struct{ heap, stack, rss float64 }
	from, to := "n1", "n2"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		report(from, 1<<40, nil) // heartbeats
		report(to, 0, nil)
		mv, err := op.StartMove(ctx, "ky3", "wg-ky3", to)
		if err != nil || mv.State != api.MovePreparing {
			b.Fatalf("start move: %+v, %v", mv, err)
		}
		m, err := gw(to).GatewayMap(ctx, 0, 0)
		if err != nil || m.Serve == nil || len(m.Serve.Peers) != n {
			b.Fatalf("standby map: %v", err)
		}
		waitParked()
		var ms runtime.MemStats
		runtime.GC() // live heap, not garbage awaiting collection
		runtime.ReadMemStats(&ms)
		heap, stack, rss = float64(ms.HeapInuse)/(1<<20), float64(ms.StackInuse)/(1<<20), rssMB()
		// RSS per device over the RSS before, both with only what is live
		// resident (the RSS reported is as control runs, GC headroom and all).
		debug.FreeOSMemory()
		rssLive := rssMB()
		goroutines, nconns = float64(runtime.NumGoroutine()), float64(conns.Load())
		perDev.heap = float64(ms.HeapInuse-ms0.HeapInuse) / 1024 / float64(n)
		perDev.stack = float64(ms.StackInuse-ms0.StackInuse) / 1024 / float64(n)
		perDev.rss = (rssLive - rss0) * 1024 / float64(n)
		if f := os.Getenv("RUNOS_FANOUT_HEAPPROFILE"); f != "" && i == 0 {
			if out, err := os.Create(f); err == nil {
				pprof.WriteHeapProfile(out)
				out.Close()
			}
		}
		// Each device counts the first map of the round that names the
		// target's key: late answers of the last round do not count.
		fmt.Fprintf(stdin, "round %d %s\n", i, nodeKeys[to].PublicKey())
		expect("armed")
		var prof *os.File
		if f := os.Getenv("RUNOS_FANOUT_CPUPROFILE"); f != "" {
			// One file per round (go tool pprof merges them); a round is
			// too short for enough samples.
			prof, _ = os.Create(fmt.Sprintf("%s.%d", f, i))
			pprof.StartCPUProfile(prof)
		}
		written.Store(0)
		fanMax.Store(0)
		b.StartTimer()
		cpu0 := proccpu.Self()
		t0 := time.Now()
		report(to, m.Version, nil) // listening: the switch, one commit
		got := expect("done")
		b.StopTimer()
		ctlCPU = append(ctlCPU, float64(proccpu.Self()-cpu0)/float64(time.Millisecond))
		if prof != nil {
			pprof.StopCPUProfile()
			prof.Close()
		}
		times := make([]float64, 3)
		for j := range times {
			ns, _ := strconv.ParseInt(got[j], 10, 64)
			times[j] = float64(time.Unix(0, ns).Sub(t0)) / float64(time.Millisecond)
		}
		p50, p99, all = append(p50, times[0]), append(p99, times[1]), append(all, times[2])
		helperCPU, _ := strconv.ParseInt(got[3], 10, 64)
		devCPU = append(devCPU, float64(helperCPU)/float64(time.Millisecond))
		fan = append(fan, float64(fanMax.Load())/float64(time.Millisecond))
		if stream {
			// A stream's request ended long ago: its writes are the
			// fan-out's (to the last event written).
			srvAll = append(srvAll, fan[len(fan)-1])
		} else {
			for written.Load() < int64(n) {
				time.Sleep(time.Millisecond)
			}
			srvAll = append(srvAll, float64(time.Unix(0, lastWrite.Load()).Sub(t0))/float64(time.Millisecond))
		}
		b.Logf("round %d: all %.0f ms, written %.0f ms, p50 %.0f ms; cpu control %.0f ms, devices %.0f ms",
			i, times[2], srvAll[len(srvAll)-1], times[0], ctlCPU[len(ctlCPU)-1], devCPU[len(devCPU)-1])
		hs := make([]api.PeerHandshake, 0, n)
		now := time.Now()
		for _, k := range keys {
			hs = append(hs, api.PeerHandshake{PublicKey: k, At: now})
		}
		report(to, m.Version, hs)
		if done := moveSettled(ctx, op, mv.ID); done.State != api.MoveDone || done.Devices.Switched != n {
			b.Fatalf("move after the handshakes: %s %+v", done.State, done.Devices)
		}
		from, to = to, from
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(median(all), "ms-all")
	b.ReportMetric(median(srvAll), "ms-written")
	b.ReportMetric(median(fan), "ms-fanout")
	b.ReportMetric(median(ctlCPU)*1000/float64(n), "cpu-us/dev")
	b.ReportMetric(perDev.heap, "heap-KB/dev")
	b.ReportMetric(perDev.stack, "stack-KB/dev")
	b.ReportMetric(perDev.rss, "rss-KB/dev")
	b.ReportMetric(median(p50), "ms-p50")
	b.ReportMetric(median(p99), "ms-p99")
	b.ReportMetric(median(ctlCPU), "cpu-ms-control")
	b.ReportMetric(median(devCPU), "cpu-ms-devices")
	b.ReportMetric(heap, "heap-MB")
	b.ReportMetric(stack, "stack-MB")
	b.ReportMetric(goroutines, "goroutines")
	b.ReportMetric(nconns, "conns")
	b.ReportMetric(rss, "rss-MB")
	b.ReportMetric(float64(n), "devices")
	if stream {
		b.ReportMetric(1, "stream")
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// TestFanOutHelper is the devices' side of BenchmarkMoveFanOut, run in its
// own process; it skips unless the benchmark started it.
func TestFanOutHelper(t *testing.T) {
	testenv.OnlyAsHelper(t, "RUNOS_FANOUT_HELPER", "BenchmarkMoveFanOut's own process")
	data, _ := os.ReadFile(os.Getenv("RUNOS_FANOUT_TOKENS"))
	raiseNoFile(t, bytes.Count(data, []byte("\n"))+256)
	pemData, _ := os.ReadFile(os.Getenv("RUNOS_FANOUT_CA"))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemData)
	// One URL, or several (replicas): device i polls the i-th modulo,
	// counted from this helper's first device when the devices are spread
	// over several helpers (RUNOS_FANOUT_OFFSET: their index among all).
	bases := strings.Split(os.Getenv("RUNOS_FANOUT_URL"), ",")
	lines := strings.Split(string(data), "\n")
	offset, _ := strconv.Atoi(os.Getenv("RUNOS_FANOUT_OFFSET"))
	timesFile := os.Getenv("RUNOS_FANOUT_TIMES")
	// on[i] is the replica (index into bases) device i last sent its poll
	// or stream to: "on K" answers how many are on replica K, so a kill's
	// failover count is known per helper.
	on := make([]atomic.Int32, len(lines))
	h2 := os.Getenv("RUNOS_FANOUT_H2") == "true"
	stream := os.Getenv("RUNOS_FANOUT_STREAM") == "true"
	var mu sync.Mutex
	round := -1
	var want string // the key this round's maps name
	var recv []int64
	seen := make([]int, len(lines)) // the round each device was last counted in
	var started atomic.Int64
	// record counts device i's map m, received at: the first of the round
	// that names its key.
	record := func(i int, m *api.DeviceMap, at int64) {
		mu.Lock()
		defer mu.Unlock()
		if round >= 0 && seen[i] != round && (want == "" || len(m.Clusters) > 0 && m.Clusters[0].VPN.PublicKey == want) {
			seen[i] = round
			recv = append(recv, at)
		}
	}
	for i := range seen {
		seen[i] = -1
	}
	// The first connections are paced: 10,000 TLS handshakes at once on
	// two CPUs outlast control's header timeout.
	dialing := make(chan struct{}, 256)
	for i, l := range lines {
		g := offset + i // the device's index among all helpers'
		base := bases[g%len(bases)]
		on[i].Store(int32(g % len(bases)))
		tok, id, _ := strings.Cut(l, " ")
		// A transport per device, as each daemon has its own, and one
		// connection: on HTTP/1.1 a re-poll sent before the transport has
		// taken back the connection of the answer would otherwise dial a
		// second one, which control would keep open, idle, and count.
		d := &net.Dialer{}
		if g >= 20000 { // a loopback source address per 20,000: the ephemeral ports run out past ~28,000 per pair
			d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+g/20000))}
		}
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, MaxConnsPerHost: 1, ForceAttemptHTTP2: h2,
			DialContext: d.DialContext}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		hc := &http.Client{Transport: tr}
		// Made by NewClient, as the daemon's is, so that its streams
		// resume with the token control gave them (issue 25).
		c, err := api.NewClient(base, tok, "")
		if err != nil {
			t.Fatal(err)
		}
		c.HTTP, c.StreamHTTP = hc, hc
		dialing <- struct{}{}
		first := func() {
			started.Add(1)
			<-dialing
		}
		if stream {
			go streamDevice(c, id, bases, g, &on[i], func(m *api.DeviceMap, at int64) { record(i, m, at) }, first)
			continue
		}
		go func() {
			var since uint64
			isFirst := true
			// counted: this device's poll broke since the benchmark armed the
			// failover count and is not re-established yet.
			var counted atomic.Bool
			next := g
			for {
				ctx := context.Background()
				if counted.Load() {
					// Re-established once the request is written to a
					// replica that took the connection.
					ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(wr httptrace.WroteRequestInfo) {
						if wr.Err == nil && counted.CompareAndSwap(true, false) {
							failover.record(time.Now())
						}
					}})
				}
				m, err := c.DeviceMap(ctx, id, since, 300*time.Second)
				at := time.Now().UnixNano()
				if err != nil {
					if !counted.Load() && failover.broke() {
						counted.Store(true)
					}
					// A balancer gives the next poll to another replica.
					next = nextReplica(next, g, len(bases))
					c.BaseURL = bases[next%len(bases)]
					on[i].Store(int32(next % len(bases)))
					time.Sleep(100 * time.Millisecond)
					continue
				}
				since = m.Version
				if isFirst {
					isFirst = false
					first()
					continue
				}
				record(i, m, at)
			}
		}()
	}
	for started.Load() < int64(len(lines)) {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("started")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 1 && f[0] == "arm" {
			failover.arm()
			fmt.Println("armed-failover")
			continue
		}
		if len(f) == 1 && f[0] == "errors" {
			fmt.Printf("errors %s\n", streamErrs.summary())
			continue
		}
		if len(f) == 2 && f[0] == "on" {
			k, _ := strconv.Atoi(f[1])
			count := 0
			for i := range on {
				if int(on[i].Load()) == k {
					count++
				}
			}
			fmt.Printf("on %d\n", count)
			continue
		}
		if len(f) == 3 && f[0] == "killed" {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			held, _ := strconv.Atoi(f[2])
			failover.report(time.Unix(0, ns), held, timesFile)
			continue
		}
		// "round N [KEY]": with KEY, a device counts the first map of the
		// round that names it.
		if len(f) < 2 || len(f) > 3 || f[0] != "round" {
			continue
		}
		r, _ := strconv.Atoi(f[1])
		cpu0 := proccpu.Self()
		progress := time.Now()
		mu.Lock()
		round, want, recv = r, "", recv[:0]
		if len(f) == 3 {
			want = f[2]
		}
		mu.Unlock()
		fmt.Println("armed")
		for {
			mu.Lock()
			if len(recv) >= len(lines) {
				s := append([]int64(nil), recv...)
				round = -1
				mu.Unlock()
				sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
				writeTimes(timesFile, s)
				// The CPU time is up to now, a millisecond or so past the
				// last answer: this loop's polling is the difference.
				fmt.Printf("done %d %d %d %d\n", s[len(s)/2], s[len(s)*99/100], s[len(s)-1], proccpu.Self()-cpu0)
				break
			}
			if time.Since(progress) >= time.Second {
				// For a test that waits with a bound (fanout_faults_test.go).
				progress = time.Now()
				fmt.Printf("waiting %d %d %s\n", len(recv), len(lines), streamErrs.summary())
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}
}

// streamDevice holds device id's map stream, resuming from the last
// version after any failure (on the next of bases, as a balancer would
// send it), as the daemon does; got gets every map with its arrival time,
// first runs after the first one.
func streamDevice(c *api.Client, id string, bases []string, g int, on *atomic.Int32, got func(*api.DeviceMap, int64), first func()) {
	var since uint64
	next := g
	isFirst := true
	// counted: this device's stream broke since the benchmark armed the
	// failover count (BenchmarkMoveFanOutReplicas) and is not open again.
	var counted atomic.Bool
	for {
		ctx := context.Background()
		if counted.Load() {
			// Open again once the request is written to a replica that
			// took the connection.
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(wr httptrace.WroteRequestInfo) {
				if wr.Err == nil && counted.CompareAndSwap(true, false) {
					failover.record(time.Now())
				}
			}})
		}
		err := c.WatchDeviceMap(ctx, id, since, func(m *api.DeviceMap) error {
			at := time.Now().UnixNano()
			since = m.Version
			if isFirst {
				isFirst = false
				first()
				return nil
			}
			got(m, at)
			return nil
		})
		if !counted.Load() && failover.broke() {
			counted.Store(true)
		} else {
			streamErrs.add(err)
		}
		next = nextReplica(next, g, len(bases))
		c.BaseURL = bases[next%len(bases)]
		on.Store(int32(next % len(bases)))
		time.Sleep(100 * time.Millisecond)
	}
}

// nextReplica is the replica device g tries after cur failed, as a
// balancer spreads a dead replica's connections: never cur again, and the
// dead one's devices spread over all the others (not all onto the next,
// which at 100,000 devices would pass its open-file limit).
func nextReplica(cur, g, n int) int {
	if n < 2 {
		return cur
	}
	return cur + 1 + g%(n-1)
}

// writeTimes writes ts (ns), one per line, to path, when there is one:
// the benchmark merges several helpers' times into one distribution.
func writeTimes(path string, ts []int64) {
	if path == "" {
		return
	}
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(strconv.FormatInt(t, 10))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "fan-out helper: times:", err)
	}
}

// streamErrors counts the errors that ended the helper's streams outside
// a failover, by control's answer (status and message) or "transport":
// printed one a line on stderr unless RUNOS_FANOUT_QUIET=1 (a fault test
// that ends thousands of streams at once asks for the counts instead).
type streamErrors struct {
	mu     sync.Mutex
	counts map[string]int
}

var streamErrs streamErrors

func (e *streamErrors) add(err error) {
	if os.Getenv("RUNOS_FANOUT_QUIET") != "1" {
		fmt.Fprintln(os.Stderr, "fan-out helper: stream:", err)
	}
	kind := "transport"
	if ae, ok := errors.AsType[*api.Error](err); ok {
		kind = fmt.Sprintf("%d-%s", ae.Status, strings.ReplaceAll(ae.Message, " ", "-"))
	}
	e.mu.Lock()
	if e.counts == nil {
		e.counts = map[string]int{}
	}
	e.counts[kind]++
	e.mu.Unlock()
}

// summary is "kind=count,…" sorted, "-" when there were none.
func (e *streamErrors) summary() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var parts []string
	for k, n := range e.counts {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	if len(parts) == 0 {
		return "-"
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// failoverTimes records, for BenchmarkMoveFanOutReplicas's failover, when
// each device whose poll broke after arm had it re-established on another
// replica.
type failoverTimes struct {
	mu     sync.Mutex
	armed  bool
	broken int
	times  []time.Time
}

var failover failoverTimes

func (f *failoverTimes) arm() {
	f.mu.Lock()
	f.armed, f.broken, f.times = true, 0, nil
	f.mu.Unlock()
}

// broke counts a broken poll; it reports whether it counts (armed), so
// that only that poll's re-establishment is recorded.
func (f *failoverTimes) broke() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed {
		f.broken++
	}
	return f.armed
}

func (f *failoverTimes) record(t time.Time) {
	f.mu.Lock()
	if f.armed {
		f.times = append(f.times, t)
	}
	f.mu.Unlock()
}

// report waits until the held polls broken since arm (the killed
// replica's) are re-established and prints "failover <devices> <p50>
// <p99> <max>" (ns from the kill).
func (f *failoverTimes) report(killed time.Time, held int, timesFile string) {
	for {
		f.mu.Lock()
		if time.Since(killed) > time.Minute {
			fmt.Fprintf(os.Stderr, "fan-out helper: after a minute %d of %d polls broke, %d re-established\n", f.broken, held, len(f.times))
			killed = time.Now()
		}
		if f.broken >= held && len(f.times) >= f.broken {
			ts := make([]int64, len(f.times))
			for i, t := range f.times {
				ts[i] = int64(t.Sub(killed))
			}
			n := f.broken
			f.armed, f.broken, f.times = false, 0, nil
			f.mu.Unlock()
			sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
			writeTimes(timesFile, ts)
			if len(ts) == 0 { // none of this helper's devices was on the killed replica
				fmt.Println("failover 0 0 0 0")
				return
			}
			fmt.Printf("failover %d %d %d %d\n", n, ts[len(ts)/2], ts[len(ts)*99/100], ts[len(ts)-1])
			return
		}
		f.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

// bulkDevices creates n signed-in devices joined to ky3 in one transaction
// and returns "token deviceID" lines and their public keys.
func bulkDevices(tb testing.TB, st store.Store, n int) ([]string, []string) {
	devices, _ := pool.NewDevices(netip.MustParsePrefix("100.96.0.0/16"))
	now := time.Now()
	var lines, keys []string
	_, err := st.Update(context.Background(), func(w store.Writer) error {
		for i := range n {
			tok := token.New()
			sess := model.Session{ID: fmt.Sprintf("ses-%d", i), TokenHash: token.Hash(tok), User: "ada@example.com", ClientID: api.ClientCLI,
				State: model.SessionLive, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
			if err := w.PutSession(sess); err != nil {
				return err
			}
			k := mustKey(tb).PublicKey().String()
			d := model.Device{ID: fmt.Sprintf("dev-%d", i), User: sess.User, Name: fmt.Sprintf("laptop%d", i), OS: "linux", PublicKey: k,
				AddrIndex: 2 + i, Address: devices.Addr(2 + i), SessionID: sess.ID, CreatedAt: now}
			if err := w.PutDevice(d); err != nil {
				return err
			}
			if _, err := w.JoinCluster(d.ID, "ky3"); err != nil {
				return err
			}
			w.Touch(hub.Device(d.ID))
			lines = append(lines, tok+" "+d.ID)
			keys = append(keys, k)
		}
		w.Touch(hub.Gateway("ky3", "n1"), hub.Gateway("ky3", "n2"), hub.Service("wg-ky3"))
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return lines, keys
}

func mustKey(tb testing.TB) wgtypes.Key {
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// raiseNoFile raises this process's open-file limit as far as it may go
// and fails if that is under need: a process short of descriptors would
// otherwise retry its accepts (or dials) until the benchmark times out.
func raiseNoFile(tb testing.TB, need int) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		tb.Fatal(err)
	}
	// As root the hard limit may go up too (with CAP_SYS_RESOURCE): 50,000
	// devices are 50,000 descriptors on each side.
	if up := (syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}); r.Max < up.Max && syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up) == nil {
		return
	}
	r.Cur = r.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		tb.Fatal(err)
	}
	if need > int(r.Cur) {
		tb.Fatalf("%d open files needed, the limit is %d and may not be raised (it takes CAP_SYS_RESOURCE): use fewer devices", need, r.Cur)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// moveSettled reads the move until it is done or failed, for up to two
// minutes: on a saturated machine (100,000 devices on two CPUs) the commit
// that finishes it can come seconds after the handshakes are reported.
func moveSettled(ctx context.Context, op *api.Client, id string) *api.Move {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m, err := op.Move(ctx, id, 0, 0)
		if err == nil && (m.State == api.MoveDone || m.State == api.MoveFailed) || time.Now().After(deadline) {
			return m
		}
		time.Sleep(100 * time.Millisecond)
	}
}
