//go:build linux

package labbench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/bench/benchplot"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// probeEnv carries a ProbeConfig (JSON) when this test binary is re-run
// inside a laptop as the handshake probe.
const probeEnv = "RUNOS_BENCH_PROBE"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(probeEnv); cfg != "" {
		os.Exit(runProbe(cfg))
	}
	code := m.Run()
	if progs.dir != "" {
		os.RemoveAll(progs.dir)
	}
	if upstream.path != "" { // its directory: left behind by every run until now
		os.RemoveAll(filepath.Dir(upstream.path))
	}
	os.Exit(code)
}

func runProbe(cfgJSON string) int {
	var cfg ProbeConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "probe config:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Handshakes(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// progs is the project's programs, built once per test binary (only when
// a lab benchmark runs, so unit tests never pay for it).
var progs struct {
	once sync.Once
	dir  string
	err  error
}

// upstream is upstream wireguard-go's program, built once per test binary.
var upstream struct {
	once sync.Once
	path string
	err  error
}

// binDir builds runos, runos-control, runos-gateway and runos-lab as a
// release would (pure Go, -trimpath, stripped: make cross and make
// packages), or uses RUNOS_BENCH_BIN. Pure Go matters to the memory
// numbers: the same daemon built with cgo, as a plain go build here does,
// maps libc and gives its threads C stacks, ~3.5 MiB more RSS at rest
// (24.6 against 28.1 MiB with two clusters, 2026-12-06).
func binDir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("RUNOS_BENCH_BIN"); d != "" {
		return d
	}
	progs.once.Do(func() {
		d, err := os.MkdirTemp("", "runos-labbench-bin-")
		if err != nil {
			progs.err = err
			return
		}
		progs.dir = d
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", d+"/",
			"../../cmd/runos", "../../cmd/runos-control", "../../cmd/runos-gateway", "../../cmd/runos-lab")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			progs.err = fmt.Errorf("building the programs: %v\n%s", err, out)
		}
	})
	if progs.err != nil {
		tb.Fatal(progs.err)
	}
	return progs.dir
}

// envInt is a positive integer from the environment, else def.
func envInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

// envDuration is a duration from the environment, else def.
func envDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		tb.Fatalf("%s=%q: want a duration such as 300ms", name, v)
	}
	return d
}

// world is one benchmark's lab.
type world struct {
	b   *testing.B
	lab *lab.Lab
	env *lab.Env
	ctx context.Context // ends with the benchmark
}

// newWorld brings up a lab with that many laptops and removes it when the
// benchmark ends (printing the end of every log first if it failed).
func newWorld(b *testing.B, clients int) *world {
	b.Helper()
	return newWorldWith(b, lab.Options{Clients: clients})
}

// newWorldWith is newWorld with more of the lab's options (control's
// store and replicas).
func newWorldWith(b *testing.B, o lab.Options) *world {
	b.Helper()
	netnstest.Require(b, "ip", "unshare", "nsenter", "findmnt", "dnsmasq", "wg", "wireguard-go", "go")
	if o.Store == lab.StorePostgres {
		netnstest.Require(b, "haproxy", "setpriv")
	}
	bin := binDir(b)
	dir := filepath.Join(b.TempDir(), "lab")
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o.Dir, o.BinDir, o.Progress = dir, bin, &progress
	l, err := lab.Up(ctx, o)
	if err != nil {
		b.Fatalf("lab up: %v\n%s", err, progress.String())
	}
	wctx, wcancel := context.WithCancel(context.Background())
	w := &world{b: b, lab: l, env: l.Env(), ctx: wctx}
	b.Cleanup(func() {
		wcancel()
		if b.Failed() {
			w.dumpLogs()
		}
		if err := lab.Down(context.Background(), dir, lab.DownOptions{}); err != nil {
			b.Errorf("lab down: %v", err)
		}
	})
	return w
}

func (w *world) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(w.env.Dir, "logs", "*.log"))
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		w.b.Logf("--- %s (end):\n%s", filepath.Base(f), strings.Join(lines, "\n"))
	}
}

// run runs argv on a host and returns its stdout and stderr, the error
// naming the command and carrying its output.
func (w *world) run(host string, extra []string, argv ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Minute)
	defer cancel()
	cmd, err := w.lab.Command(ctx, host, extra, argv...)
	if err != nil {
		return "", "", err
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		return o.String(), e.String(), fmt.Errorf("on %s: %s: %w\n%s%s", host, strings.Join(argv, " "), err, o.String(), e.String())
	}
	return o.String(), e.String(), nil
}

// must is run that fails the benchmark on error and returns stdout.
func (w *world) must(host string, extra []string, argv ...string) string {
	w.b.Helper()
	out, _, err := w.run(host, extra, argv...)
	if err != nil {
		w.b.Fatal(err)
	}
	return out
}

// upAll runs `runos vpn up --cid cid` on every laptop (the lab's scripted
// browser signs in through the real login page), a few at a time.
func (w *world) upAll(cid string) {
	w.b.Helper()
	var g errgroup.Group
	g.SetLimit(3)
	for _, c := range w.env.Clients {
		g.Go(func() error {
			_, _, err := w.run(c.Host, nil, "runos", "vpn", "up", "--cid", cid)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		w.b.Fatal(err)
	}
}

// daemon is a laptop daemon's local API client.
func (w *world) daemon(host string) *localapi.Client {
	c, ok := w.env.Laptop(host)
	if !ok {
		w.b.Fatalf("no laptop %s in the lab", host)
	}
	return localapi.NewClient(c.Socket)
}

// follow starts following a laptop's watch stream for the whole benchmark.
func (w *world) follow(host string) *Follower {
	return Follow(w.ctx, host, w.daemon(host).Watch, time.Now)
}

// waitEach waits until cond holds on every follower.
func (w *world) waitEach(fs []*Follower, what string, timeout time.Duration, cond func(*localapi.Status) bool) {
	w.b.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
	defer cancel()
	for _, f := range fs {
		if _, err := f.Until(ctx, cond); err != nil {
			w.b.Fatalf("%s: %v", what, err)
		}
	}
}

// apiClient is a control client from inside a host that keeps its
// connection (HTTP/2, as the daemon's and the CLI's do), so a request
// costs one round trip and not a TLS handshake.
func (w *world) apiClient(host, token string) *api.Client {
	w.b.Helper()
	pem, err := os.ReadFile(w.env.CAFile)
	if err != nil {
		w.b.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		w.b.Fatalf("lab CA %s: no certificate", w.env.CAFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return w.lab.Dial(ctx, host, network, addr)
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	tr.ForceAttemptHTTP2 = true
	w.b.Cleanup(tr.CloseIdleConnections)
	return &api.Client{BaseURL: w.env.APIURL, Token: token, HTTP: &http.Client{Transport: tr, Timeout: time.Minute}}
}

// rss reads a lab program's resident and peak memory in kB.
func (w *world) rss(host, name string) (rssKB, hwmKB int) {
	w.b.Helper()
	kb := w.statusKB(host, name, "VmRSS", "VmHWM")
	return kb[0], kb[1]
}

// rssSplit is a lab program's resident memory by kind (kB): anonymous
// (heap, stacks) and file-backed (its binary's pages, shared libraries).
// A daemon's RSS at rest is more than half its binary's pages, which grow
// with the code it runs, not with what it holds.
func (w *world) rssSplit(host, name string) (anonKB, fileKB int) {
	w.b.Helper()
	kb := w.statusKB(host, name, "RssAnon", "RssFile")
	return kb[0], kb[1]
}

// statusKB reads the fields (in kB) of a running lab program's
// /proc/PID/status.
func (w *world) statusKB(host, name string, fields ...string) []int {
	w.b.Helper()
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.pid(host, name)))
	if err != nil {
		w.b.Fatal(err)
	}
	kb := make([]int, len(fields))
	for i, f := range fields {
		if kb[i], err = StatusKB(st, f); err != nil {
			w.b.Fatalf("%s on %s: %v", name, host, err)
		}
	}
	return kb
}

// pid is a lab program's recorded PID.
func (w *world) pid(host, name string) int {
	p, ok := w.lab.Proc(host, name)
	if !ok || !p.Alive() {
		w.b.Fatalf("%s on %s is not running", name, host)
	}
	return p.PID
}

// newResult starts the benchmark's results document.
func (w *world) newResult(name, reproduce string) *Result {
	m := DescribeMachine(os.DirFS("/"))
	if out, err := exec.Command("git", "-C", "../..", "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	m.Note = os.Getenv("RUNOS_BENCH_MACHINE")
	r := NewResult(name, time.Now(), m)
	r.Reproduce = reproduce
	return r
}

// save writes the result to RUNOS_BENCH_RESULTS (default bench/results).
func (w *world) save(r *Result) {
	w.b.Helper()
	dir := os.Getenv("RUNOS_BENCH_RESULTS")
	if dir == "" {
		dir = filepath.Join("..", "results")
	}
	path, err := r.Write(dir, time.Now())
	if err != nil {
		w.b.Fatal(err)
	}
	// From the repository's root (the test runs in bench/labbench): make
	// bench keeps this output in bench/results/, which holds no path of
	// the machine (internal/repotest).
	shown := path
	if !filepath.IsAbs(path) {
		shown = filepath.Join("bench", "labbench", path)
	}
	w.b.Logf("results: %s", shown)
	// Its plot beside it (bench/benchplot); make bench redraws the summary
	// plots after every benchmark has run.
	svg, err := benchplot.RenderFile(path)
	if err != nil {
		w.b.Errorf("plot of %s: %v", path, err)
	} else if svg != "" {
		w.b.Logf("plot: %s", svg)
	}
}

// A lab benchmark does a fixed amount of work, set by its RUNOS_BENCH_*
// variables and not by b.N: a lab takes seconds to bring up, so with the
// default -benchtime the framework calls it once. Should it call again
// (a longer -benchtime), the work is not repeated and the first call's
// metrics are reported again, ns/op being that call's whole run.
var fixedRuns sync.Map // benchmark name → []metric

type metric struct {
	v    float64
	unit string
}

// metrics reports a benchmark's metrics and keeps them for fixedWork.
type metrics struct {
	b    *testing.B
	list []metric
}

func (m *metrics) add(v float64, unit string) {
	m.b.ReportMetric(v, unit)
	m.list = append(m.list, metric{v, unit})
}

// summary puts a summary's p50/p99/max on the benchmark line.
func (m *metrics) summary(key string, s Summary) {
	m.add(s.P50, key+"-p50-ms")
	m.add(s.P99, key+"-p99-ms")
	m.add(s.Max, key+"-max-ms")
}

// fixedWork runs a lab benchmark's work once per process (see fixedRuns).
func fixedWork(b *testing.B, work func(b *testing.B, m *metrics)) {
	if prev, ok := fixedRuns.Load(b.Name()); ok {
		for _, x := range prev.([]metric) {
			b.ReportMetric(x.v, x.unit)
		}
		return
	}
	m := &metrics{b: b}
	start := time.Now()
	work(b, m)
	m.add(float64(time.Since(start).Nanoseconds()), "ns/op")
	if !b.Failed() {
		fixedRuns.Store(b.Name(), m.list)
	}
}

// logSummary prints a summary in one line. Without -v only headline
// summaries are printed: go test keeps just the first ten lines of a
// benchmark's log, and the JSON has every one.
func logSummary(b *testing.B, key string, s Summary, headline bool) {
	if !headline && !testing.Verbose() {
		return
	}
	b.Logf("%-28s n=%-4d p50 %8.2f  p90 %8.2f  p99 %8.2f  max %8.2f  mean %8.2f  min %8.2f",
		key, s.N, s.P50, s.P90, s.P99, s.Max, s.Mean, s.Min)
}

// stock is a Debian wireguard-go interface a benchmark runs on a host.
type stock struct {
	host, iface string
	key         wgtypes.Key
}

func (s stock) pub() string { return s.key.PublicKey().String() }

// stockPeer runs Debian's wireguard-go on a host (configured by the stock
// wg tool, as an operator would) with a fresh key, the given address and
// listen port (0 for any); it is stopped when the benchmark ends.
func (w *world) stockPeer(host, iface, addr string, port int) stock {
	w.b.Helper()
	return w.wgPeer("wireguard-go", host, iface, addr, port)
}

// upstreamPeer is stockPeer with upstream wireguard-go built from the
// module version this project's go.mod requires (upstreamWireGuard):
// the same device code the project runs, without the project around it.
func (w *world) upstreamPeer(host, iface, addr string, port int) stock {
	w.b.Helper()
	return w.wgPeer(upstreamWireGuard(w.b), host, iface, addr, port)
}

// upstreamWireGuard builds golang.zx2c4.com/wireguard's own program (its
// module root is package main) at the version in go.mod, once.
func upstreamWireGuard(tb testing.TB) string {
	tb.Helper()
	upstream.once.Do(func() {
		d, err := os.MkdirTemp("", "runos-labbench-wg-")
		if err != nil {
			upstream.err = err
			return
		}
		upstream.path = filepath.Join(d, "wireguard-go-upstream")
		build := exec.Command("go", "build", "-trimpath", "-o", upstream.path, "golang.zx2c4.com/wireguard")
		if out, err := build.CombinedOutput(); err != nil {
			upstream.err = fmt.Errorf("building upstream wireguard-go: %v\n%s", err, out)
		}
	})
	if upstream.err != nil {
		tb.Fatal(upstream.err)
	}
	return upstream.path
}

func (w *world) wgPeer(bin, host, iface, addr string, port int) stock {
	w.b.Helper()
	key, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		w.b.Fatal(err)
	}
	cmd, err := w.lab.Command(context.Background(), host, nil, bin, "-f", iface)
	if err != nil {
		w.b.Fatal(err)
	}
	// A session of its own, as the lab starts runos's daemon and gateway
	// (and as a service manager starts any tunnel): with the kernel's
	// autogroups each session is a scheduling group, and a wireguard-go
	// left in the benchmark's session shared one group with the iperf3
	// client. That arrangement alone took the runos gateway from
	// 0.83–0.86 to 0.87–0.99 of upstream when it was moved into the
	// benchmark's session (docs/performance.md "Autogroups"): both
	// tunnels must be placed alike for their ratio to mean anything.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.b.Fatal(err)
	}
	w.b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	w.waitFor(10*time.Second, "wireguard-go "+iface+" on "+host, func() bool {
		_, _, err := w.run(host, nil, "wg", "show", iface)
		return err == nil
	})
	kf := filepath.Join(w.b.TempDir(), iface+".key")
	if err := os.WriteFile(kf, []byte(key.String()+"\n"), 0o600); err != nil {
		w.b.Fatal(err)
	}
	args := []string{"wg", "set", iface, "private-key", kf}
	if port != 0 {
		args = append(args, "listen-port", strconv.Itoa(port))
	}
	w.must(host, nil, args...)
	w.must(host, nil, "ip", "addr", "add", addr, "dev", iface)
	w.must(host, nil, "ip", "link", "set", iface, "up")
	return stock{host: host, iface: iface, key: key}
}

// waitFor polls cond (for things with no stream: the stock wg tool on a
// node) until it holds or timeout passes. Never on a timed path.
func (w *world) waitFor(timeout time.Duration, what string, cond func() bool) {
	w.b.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			w.b.Fatalf("not %s within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ifaceName is a WireGuard interface name unique to this run.
func ifaceName(prefix string) string { return fmt.Sprintf("%s%d", prefix, os.Getpid()%100000) }

// perfDuring starts a system-wide CPU profile (Linux perf, call graphs)
// into file for secs seconds, for RUNOS_BENCH_PERF: where the tunnel's
// CPU goes, by program and function, against upstream wireguard-go's
// (issue 24). The returned func waits for it. Build the programs unstripped
// (RUNOS_BENCH_BIN) for their symbols.
func (w *world) perfDuring(file string, secs int) func() {
	w.b.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		w.b.Fatal(err)
	}
	cmd := exec.Command("perf", "record", "-a", "-g", "-F", "499", "-o", file, "--", "sleep", strconv.Itoa(secs))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		w.b.Fatalf("perf record: %v", err)
	}
	return func() {
		if err := cmd.Wait(); err != nil {
			w.b.Fatalf("perf record: %v\n%s", err, out)
		}
	}
}

// daemonHeap is a laptop daemon's runtime.MemStats, read over its local
// API right after a collection: what its GC pacing left (NextGC, NumGC)
// beside what the kernel says of its RSS.
func (w *world) daemonHeap(host string) map[string]uint64 {
	w.b.Helper()
	ms, err := w.daemon(host).MemStats(w.ctx)
	if err != nil {
		w.b.Fatalf("%s's daemon heap: %v", host, err)
	}
	return ms
}
