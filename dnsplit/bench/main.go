//go:build linux

// Command bench measures the split-DNS forwarder against dnsmasq forwarding
// the same queries to the same upstream on the same machine, both driven by
// Debian's dnsperf in one run, and writes the numbers as JSON.
//
//	sudo go run ./dnsplit/bench -out dnsplit/bench/results.json
//
// Everything runs in a network namespace of its own (it re-executes itself
// under `unshare -n`), so the fixed loopback addresses and port 53 collide
// with nothing. The forwarder is the real one, started through dnsplit.New
// in resolv.conf mode exactly as the daemon does; dnsmasq runs with its cache
// off so that it, too, forwards every query. The upstream is a separate
// process answering every name at once. "Added" latency is each forwarder's
// latency minus the upstream's own, at the same fixed query rate.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/runos/vpn/dnsplit"
)

const (
	upstreamAddr = "127.0.81.1"  // the "original" nameserver
	clusterAddr  = "127.0.81.2"  // the cluster's DNS server
	dnsmasqAddr  = "127.0.82.53" // dnsmasq, forwarding to upstreamAddr
	innerEnv     = "RUNOS_DNSPLIT_BENCH_INNER"
)

var forwarderAddr = dnsplit.DefaultListenAddr.Addr().String()

func main() {
	var (
		out      = flag.String("out", "", "write the results as JSON to this file (default: stdout only)")
		duration = flag.Duration("duration", 10*time.Second, "length of each dnsperf run")
		rate     = flag.Int("rate", 2000, "queries per second in the latency runs (well below saturation, so latency is not queueing)")
		rounds   = flag.Int("rounds", 3, "runs per target, interleaved; the median is reported")
		names    = flag.Int("names", 10000, "distinct names in the query file")
		role     = flag.String("role", "", "internal: upstream, or forwarder (serve the forwarder alone until killed)")
		traceOut = flag.String("trace", "", "with -role=forwarder: write a Go runtime trace of the forwarder to this file until it is killed (go tool trace -pprof=sched)")
	)
	flag.Parse()
	switch *role {
	case "upstream":
		serveUpstream()
		return
	case "forwarder":
		serveForwarder(*traceOut)
		return
	}
	if os.Getenv(innerEnv) == "" {
		os.Exit(reexecInNamespace())
	}
	res, err := run(*duration, *rate, *rounds, *names)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(b))
	if *out != "" {
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
}

// reexecInNamespace runs this program again in a fresh network namespace.
func reexecInNamespace() int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench: needs root (a network namespace and port 53); run it with sudo")
		return 2
	}
	for _, tool := range []string{"unshare", "ip", "dnsperf", "dnsmasq"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "bench: needs %s (apt-get install dnsperf dnsmasq-base util-linux iproute2)\n", tool)
			return 2
		}
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	cmd := exec.Command("unshare", append([]string{"-n", "--", self}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), innerEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

// serveUpstream answers every A query with 192.0.2.1, on both upstream
// addresses, until killed.
func serveUpstream() {
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(req)
		r.Authoritative = true
		if q := req.Question[0]; q.Qtype == dns.TypeA {
			r.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.IPv4(192, 0, 2, 1).To4()}}
		}
		_ = w.WriteMsg(r)
	})
	errc := make(chan error)
	for _, a := range []string{upstreamAddr, clusterAddr} {
		s := &dns.Server{Addr: net.JoinHostPort(a, "53"), Net: "udp", Handler: h, ReusePort: true}
		go func() { errc <- s.ListenAndServe() }()
	}
	fmt.Fprintln(os.Stderr, "upstream:", <-errc)
	os.Exit(1)
}

// serveForwarder runs the forwarder on its own (for measuring it by hand:
// `unshare -n`, then dnsperf against 127.0.80.53), until killed.
func serveForwarder(traceOut string) {
	if traceOut != "" {
		f, err := os.Create(traceOut)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "trace:", err)
			os.Exit(1)
		}
		defer func() { trace.Stop(); f.Close() }()
	}
	dir, err := os.MkdirTemp("", "runos-dnsplit-fwd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	c, err := startForwarder(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

// startForwarder starts the real forwarder, as the daemon does (resolv.conf
// mode), on a resolv.conf of its own naming the upstream.
func startForwarder(dir string) (dnsplit.Configurator, error) {
	rc := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(rc, []byte("nameserver "+upstreamAddr+"\n"), 0o644); err != nil {
		return nil, err
	}
	cfg, err := dnsplit.New(dnsplit.Options{Interface: "lo", StateDir: filepath.Join(dir, "state"), ResolvConf: rc,
		Mode: dnsplit.ModeResolvConf, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	err = cfg.Set(context.Background(), []dnsplit.Route{{CID: "ky3", Server: netip.MustParseAddr(clusterAddr), Domains: []string{"ky3.rjwrn.example.com"}}})
	if err != nil {
		cfg.Close()
		return nil, err
	}
	return cfg, nil
}

// Target is one server measured.
type Target struct {
	Name      string  `json:"name"`
	Address   string  `json:"address"`
	QPS       float64 `json:"qps"`        // median of the throughput runs
	Lost      float64 `json:"lostPct"`    // in the throughput runs
	P50us     float64 `json:"p50Us"`      // at the fixed rate
	P99us     float64 `json:"p99Us"`      // at the fixed rate
	P999us    float64 `json:"p999Us"`     // at the fixed rate
	AddedP50  float64 `json:"addedP50Us"` // over the upstream's own
	AddedP99  float64 `json:"addedP99Us"`
	AddedP999 float64 `json:"addedP999Us"`
	// The spread of the added latencies over the rounds: min and max.
	AddedP99Range  [2]float64 `json:"addedP99UsRange"`
	AddedP999Range [2]float64 `json:"addedP999UsRange"`
	QPSRange       [2]float64 `json:"qpsRange"`
	ClusterQP      float64    `json:"clusterQps,omitempty"` // throughput for cluster names (split routing)
	CPUus          float64    `json:"cpuUsPerQuery"`        // the server's own CPU time per answered query, throughput runs
	Runs           []Run      `json:"runs"`
	cpu            func() time.Duration
}

// Run is one dnsperf invocation's result.
type Run struct {
	Kind   string  `json:"kind"` // throughput, latency, cluster
	QPS    float64 `json:"qps"`
	CPUus  float64 `json:"cpuUsPerQuery,omitempty"`
	Lost   float64 `json:"lostPct"`
	P50us  float64 `json:"p50Us,omitempty"`
	P99us  float64 `json:"p99Us,omitempty"`
	P999us float64 `json:"p999Us,omitempty"`
}

// Result is the JSON written.
type Result struct {
	Command  string    `json:"command"`
	When     time.Time `json:"when"`
	CPUs     int       `json:"cpus"`
	Kernel   string    `json:"kernel"`
	Dnsperf  string    `json:"dnsperf"`
	Dnsmasq  string    `json:"dnsmasq"`
	Duration string    `json:"durationPerRun"`
	Rate     int       `json:"latencyRateQps"`
	Rounds   int       `json:"rounds"`
	Targets  []*Target `json:"targets"`
	Verdict  []string  `json:"verdict"`
}

func run(duration time.Duration, rate, rounds, names int) (*Result, error) {
	if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("lo up: %v: %s", err, out)
	}
	dir, err := os.MkdirTemp("", "runos-dnsplit-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	self, _ := os.Executable()
	up := exec.Command(self, "-role=upstream")
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = up.Process.Kill(); _ = up.Wait() }()
	if err := waitAnswer(upstreamAddr); err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}

	// The real forwarder, as the daemon starts it, in a process of its own
	// like dnsmasq, so that each one's CPU time is its own.
	fw := exec.Command(self, "-role=forwarder")
	fw.Stderr = os.Stderr
	if err := fw.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = fw.Process.Signal(syscall.SIGTERM); _ = fw.Wait() }()

	// dnsmasq doing the same job: the cluster domain to the cluster's
	// server, the rest upstream; no cache, so every query is forwarded.
	dm := exec.Command("dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts", "--cache-size=0", "--dns-forward-max=1000",
		"--server="+upstreamAddr, "--server=/ky3.rjwrn.example.com/"+clusterAddr,
		"--listen-address="+dnsmasqAddr, "--bind-interfaces", "--port=53", "--pid-file="+filepath.Join(dir, "dnsmasq.pid"), "--user=root")
	dm.Stderr = os.Stderr
	if err := dm.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = dm.Process.Kill(); _ = dm.Wait() }()
	for _, a := range []string{forwarderAddr, dnsmasqAddr} {
		if err := waitAnswer(a); err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
	}

	public, cluster := filepath.Join(dir, "public.txt"), filepath.Join(dir, "cluster.txt")
	var pb, cb strings.Builder
	for i := range names {
		fmt.Fprintf(&pb, "host%d.example.test A\n", i)
		fmt.Fprintf(&cb, "app%d.ky3.rjwrn.example.com A\n", i)
	}
	_ = os.WriteFile(public, []byte(pb.String()), 0o644)
	_ = os.WriteFile(cluster, []byte(cb.String()), 0o644)

	res := &Result{
		Command:  "sudo go run ./dnsplit/bench " + strings.Join(portableArgs(os.Args[1:]), " "),
		When:     time.Now().UTC(),
		CPUs:     runtime.NumCPU(),
		Kernel:   firstLine(exec.Command("uname", "-r")),
		Dnsperf:  versionOf("dnsperf", "-h"),
		Dnsmasq:  versionOf("dnsmasq", "--version"),
		Duration: duration.String(),
		Rate:     rate,
		Rounds:   rounds,
		Targets: []*Target{
			{Name: "upstream (no forwarder)", Address: upstreamAddr, cpu: procCPU(up.Process.Pid)},
			{Name: "runos forwarder", Address: forwarderAddr, cpu: procCPU(fw.Process.Pid)},
			{Name: "dnsmasq --cache-size=0", Address: dnsmasqAddr, cpu: procCPU(dm.Process.Pid)},
		},
	}
	secs := strconv.Itoa(max(1, int(duration.Seconds())))
	for round := range rounds {
		for _, t := range res.Targets {
			fmt.Fprintf(os.Stderr, "round %d/%d: %s\n", round+1, rounds, t.Name)
			c0 := t.cpu()
			r, err := dnsperf(t.Address, public, "-l", secs, "-q", "200")
			if err != nil {
				return nil, err
			}
			r.Kind = "throughput"
			if n := r.QPS * duration.Seconds(); n > 0 {
				r.CPUus = float64((t.cpu() - c0).Microseconds()) / n
			}
			t.Runs = append(t.Runs, r)
			r, err = dnsperf(t.Address, public, "-l", secs, "-Q", strconv.Itoa(rate), "-v")
			if err != nil {
				return nil, err
			}
			r.Kind = "latency"
			t.Runs = append(t.Runs, r)
			if t.Address != upstreamAddr {
				r, err = dnsperf(t.Address, cluster, "-l", secs, "-q", "200")
				if err != nil {
					return nil, err
				}
				r.Kind = "cluster"
				t.Runs = append(t.Runs, r)
			}
		}
	}
	for _, t := range res.Targets {
		t.QPS = median(t.Runs, "throughput", func(r Run) float64 { return r.QPS })
		t.Lost = median(t.Runs, "throughput", func(r Run) float64 { return r.Lost })
		t.P50us = median(t.Runs, "latency", func(r Run) float64 { return r.P50us })
		t.P99us = median(t.Runs, "latency", func(r Run) float64 { return r.P99us })
		t.P999us = median(t.Runs, "latency", func(r Run) float64 { return r.P999us })
		t.QPSRange = spread(t.Runs, "throughput", func(r Run) float64 { return r.QPS })
		t.ClusterQP = median(t.Runs, "cluster", func(r Run) float64 { return r.QPS })
		t.CPUus = median(t.Runs, "throughput", func(r Run) float64 { return r.CPUus })
	}
	// Added latency is paired per round (each forwarder's latency run
	// against the upstream's in the same round, minutes apart at most), so
	// a round slowed by the machine's other load is compared with itself.
	base, fwd, dm2 := res.Targets[0], res.Targets[1], res.Targets[2]
	baseLat := latencyRuns(base)
	for _, t := range res.Targets[1:] {
		var p50, p99, p999 []float64
		for i, r := range latencyRuns(t) {
			p50 = append(p50, r.P50us-baseLat[i].P50us)
			p99 = append(p99, r.P99us-baseLat[i].P99us)
			p999 = append(p999, r.P999us-baseLat[i].P999us)
		}
		t.AddedP50, t.AddedP99, t.AddedP999 = medianOf(p50), medianOf(p99), medianOf(p999)
		t.AddedP99Range, t.AddedP999Range = [2]float64{slices.Min(p99), slices.Max(p99)}, [2]float64{slices.Min(p999), slices.Max(p999)}
	}
	res.Verdict = []string{
		fmt.Sprintf("rate: forwarder %.0f qps vs dnsmasq %.0f qps (%.2fx; target >= 1x)", fwd.QPS, dm2.QPS, fwd.QPS/dm2.QPS),
		fmt.Sprintf("added latency at p50: forwarder %.0f us vs dnsmasq %.0f us (target < 100 us)", fwd.AddedP50, dm2.AddedP50),
		fmt.Sprintf("rate over the rounds: forwarder %.0f-%.0f qps, dnsmasq %.0f-%.0f qps", fwd.QPSRange[0], fwd.QPSRange[1], dm2.QPSRange[0], dm2.QPSRange[1]),
		fmt.Sprintf("added latency at p99: forwarder %.0f us (%.0f to %.0f) vs dnsmasq %.0f us (%.0f to %.0f)",
			fwd.AddedP99, fwd.AddedP99Range[0], fwd.AddedP99Range[1], dm2.AddedP99, dm2.AddedP99Range[0], dm2.AddedP99Range[1]),
		fmt.Sprintf("added latency at p99.9: forwarder %.0f us (%.0f to %.0f) vs dnsmasq %.0f us (%.0f to %.0f)",
			fwd.AddedP999, fwd.AddedP999Range[0], fwd.AddedP999Range[1], dm2.AddedP999, dm2.AddedP999Range[0], dm2.AddedP999Range[1]),
		fmt.Sprintf("CPU per query: forwarder %.1f us vs dnsmasq %.1f us", fwd.CPUus, dm2.CPUus),
	}
	return res, nil
}

// dnsperf runs one measurement and parses its statistics (and, with -v,
// every query's latency).
func dnsperf(server, file string, args ...string) (Run, error) {
	cmd := exec.Command("dnsperf", append([]string{"-s", server, "-d", file}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		return Run{}, fmt.Errorf("dnsperf %s: %w", strings.Join(cmd.Args[1:], " "), err)
	}
	var r Run
	var lat []float64
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 5 && f[0] == ">":
			if v, err := strconv.ParseFloat(f[4], 64); err == nil {
				lat = append(lat, v*1e6)
			}
		case strings.HasPrefix(strings.TrimSpace(line), "Queries per second:"):
			r.QPS, _ = strconv.ParseFloat(f[len(f)-1], 64)
		case strings.HasPrefix(strings.TrimSpace(line), "Queries lost:"):
			r.Lost, _ = strconv.ParseFloat(strings.Trim(f[len(f)-1], "()%"), 64)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50us = lat[len(lat)*50/100]
		r.P99us = lat[len(lat)*99/100]
		r.P999us = lat[len(lat)*999/1000]
	}
	return r, nil
}

func median(runs []Run, kind string, f func(Run) float64) float64 {
	var vs []float64
	for _, r := range runs {
		if r.Kind == kind {
			vs = append(vs, f(r))
		}
	}
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

// spread is the least and the largest of f over the runs of a kind.
func spread(runs []Run, kind string, f func(Run) float64) [2]float64 {
	var vs []float64
	for _, r := range runs {
		if r.Kind == kind {
			vs = append(vs, f(r))
		}
	}
	if len(vs) == 0 {
		return [2]float64{}
	}
	return [2]float64{slices.Min(vs), slices.Max(vs)}
}

func latencyRuns(t *Target) []Run {
	var rs []Run
	for _, r := range t.Runs {
		if r.Kind == "latency" {
			rs = append(rs, r)
		}
	}
	return rs
}

func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	return vs[len(vs)/2]
}

func waitAnswer(addr string) error {
	m := new(dns.Msg)
	m.SetQuestion("ready.example.test.", dns.TypeA)
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	var err error
	for range 50 {
		if _, _, err = c.Exchange(m, net.JoinHostPort(addr, "53")); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// procCPU reads another process's CPU time from /proc/PID/stat.
func procCPU(pid int) func() time.Duration {
	return func() time.Duration {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0
		}
		// Fields after the command name (which may hold spaces): state is
		// field 3, utime 14, stime 15, in clock ticks (100 a second on Linux).
		_, rest, _ := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if len(f) < 13 {
			return 0
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(u+s) * 10 * time.Millisecond
	}
}

func versionOf(tool string, arg string) string {
	out, _ := exec.Command(tool, arg).CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "ersion") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func firstLine(cmd *exec.Cmd) string {
	out, _ := cmd.Output()
	l, _, _ := strings.Cut(string(out), "\n")
	return l
}

// portableArgs is the command's arguments as the result records them: an
// absolute path (the -out file) is cut to its base name, so that a result
// committed to the repository carries no path of the machine it ran on.
func portableArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		name, val, isFlag := strings.Cut(a, "=")
		switch {
		case filepath.IsAbs(a):
			out[i] = filepath.Base(a)
		case isFlag && filepath.IsAbs(val):
			out[i] = name + "=" + filepath.Base(val)
		default:
			out[i] = a
		}
	}
	return out
}
