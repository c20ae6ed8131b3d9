//go:build linux

package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/notify"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/sqlstore"
	"github.com/runos/vpn/control/tlsgate"
	"github.com/runos/vpn/internal/pgtest"
	"github.com/runos/vpn/internal/proccpu"
	"github.com/runos/vpn/internal/testenv"
)

// BenchmarkMoveFanOutReplicas is BenchmarkMoveFanOut over PostgreSQL with
// control as separate processes: replicas-1 is one, replicas-3 is three,
// with the devices spread evenly (device i long-polls replica i mod N, as
// a balancer spreads them). The switch is committed on replica 1; the
// others hear it through LISTEN/NOTIFY (control/notify). Both run in one
// invocation, on the same PostgreSQL server (started by the benchmark):
//
//	go test -run='^$' -bench=BenchmarkMoveFanOutReplicas -benchtime=5x ./control/server/
//
// Metrics: ms-all, ms-p50, ms-p99 (commit to the last, median and 99th
// percentile device); for each replica k (1-based) cpu-ms-rk (its CPU per
// round, commit to last answer) and rss-MB-rk (with every long-poll
// parked); cpu-ms-devices. With several replicas, then, each is killed in
// turn with every poll parked: failover-ms-p50 and -p99 (medians over the
// kills) from the kill to each of its devices' polls sent to a live
// replica, and failover-ms-max, the longest any device went without its
// map's long-poll. RUNOS_FANOUT_DEVICES sets the count (10,000);
// RUNOS_FANOUT_STREAM=1 has each device hold a push stream instead
// (resumed on another replica from its version when its own is killed).
// RUNOS_FANOUT_REPLICAS lists the replica counts (1,3). The devices live
// in as many helper processes as the open-file limit needs (one per
// ~19,000 here), so 50,000 and 100,000 devices run across replicas:
//
//	RUNOS_FANOUT_DEVICES=100000 RUNOS_FANOUT_STREAM=1 RUNOS_FANOUT_REPLICAS=8 \
//	  go test -run='^$' -bench=BenchmarkMoveFanOutReplicas -benchtime=3x -timeout=60m ./control/server/
//
// Each replica holds its share in its own process too, so it needs
// devices/replicas descriptors and, after a kill, its share of the killed
// one's: at 100,000, 8 replicas. At most three replicas are killed
// (RUNOS_FANOUT_KILLS: how many; 0 measures the fan-out alone).
//
// Each replica serves TLS as control does, its handshakes a few at a time
// (control/tlsgate); RUNOS_FANOUT_TLSGATE=0 has them serve every handshake
// at once, as before it.
//
// RUNOS_FANOUT_JSON=<dir> writes each sub-benchmark's result into dir as
// fanout-replicas-<replicas>-<devices>-<start, UTC>.json: every round and
// failover (the text output keeps only ten log lines of each), the
// metrics, and the machine's limits (CPUs, the open-file limit, memory,
// load before and after, Go, the commit); bench/plot -replicas draws them.
func BenchmarkMoveFanOutReplicas(b *testing.B) {
	pg := pgtest.Start(b)
	counts := []int{1, 3}
	if v := os.Getenv("RUNOS_FANOUT_REPLICAS"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			r, err := strconv.Atoi(f)
			if err != nil || r < 1 {
				b.Fatalf("RUNOS_FANOUT_REPLICAS=%q: want replica counts such as 1,3,8", v)
			}
			counts = append(counts, r)
		}
	}
	jsonDir := os.Getenv("RUNOS_FANOUT_JSON")
	for _, r := range counts {
		// The framework calls the sub-benchmark more than once (a warm-up
		// first): its last call is the measured one, known only here.
		res := newFanOutResult(r)
		ok := b.Run(fmt.Sprintf("replicas-%d", r), func(b *testing.B) { fanOutReplicas(b, pg, r, res) })
		if jsonDir == "" {
			continue
		}
		if err := res.write(jsonDir, ok); err != nil {
			b.Errorf("RUNOS_FANOUT_JSON: %v", err)
		}
	}
}

// fanOutReplicas is one call of a sub-benchmark, recorded into res.
func fanOutReplicas(b *testing.B, pg *pgtest.Server, replicas int, res *fanOutResult) {
	n := 10000
	if v := os.Getenv("RUNOS_FANOUT_DEVICES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	raiseNoFile(b, 0) // the replicas and the devices' helper hold the connections
	ctx := context.Background()
	w := newReplicaWorld(b, pg, replicas, n)
	op, report := w.op, w.report
	report("n1", 1<<40, nil)

	stream := os.Getenv("RUNOS_FANOUT_STREAM") == "1"
	run := res.begin(b, n, stream)
	devs := startDeviceHelpers(b, w.dir, w.tokens, w.urls, w.caFile, stream)
	b.Logf("%d devices in %d helper processes (at most %d each: the open-file limit), %d replicas", n, len(devs.procs), devicesPerHelper(), replicas)
	w.waitHeld()

	var all, p50, p99, devCPU []float64
	ctlCPU := make([][]float64, replicas)
	rss := make([]float64, replicas)
	from, to := "n1", "n2"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		report(from, 1<<40, nil)
		report(to, 0, nil)
		mv, err := op.StartMove(ctx, "ky3", "wg-ky3", to)
		if err != nil || mv.State != api.MovePreparing {
			b.Fatalf("start move: %+v, %v", mv, err)
		}
		m, err := w.gateway(to).GatewayMap(ctx, 0, 0)
		if err != nil || m.Serve == nil || len(m.Serve.Peers) != n {
			b.Fatalf("standby map: %v", err)
		}
		w.waitHeld()
		cpu0 := make([]time.Duration, replicas)
		for k, r := range w.reps {
			rss[k] = procRSSMB(r.cmd.Process.Pid)
			cpu0[k] = proccpu.Of(r.cmd.Process.Pid)
		}
		devs.arm(i)
		b.StartTimer()
		t0 := time.Now()
		report(to, m.Version, nil) // listening: the switch, one commit, on replica 1
		got, helperCPU := devs.done()
		b.StopTimer()
		for k, r := range w.reps {
			ctlCPU[k] = append(ctlCPU[k], float64(proccpu.Of(r.cmd.Process.Pid)-cpu0[k])/float64(time.Millisecond))
		}
		times := []float64{quantileMS(got, 0.5, t0.UnixNano()), quantileMS(got, 0.99, t0.UnixNano()), quantileMS(got, 1, t0.UnixNano())}
		p50, p99, all = append(p50, times[0]), append(p99, times[1]), append(all, times[2])
		devCPU = append(devCPU, float64(helperCPU)/float64(time.Millisecond))
		var cpus []string
		for k := range w.reps {
			cpus = append(cpus, fmt.Sprintf("r%d %.0f ms", k+1, ctlCPU[k][len(ctlCPU[k])-1]))
		}
		b.Logf("round %d: all %.0f ms, p50 %.0f ms; cpu %s, devices %.0f ms", i, times[2], times[0], strings.Join(cpus, ", "), devCPU[len(devCPU)-1])
		run.Rounds = append(run.Rounds, fanOutRound{Round: i, AllMs: times[2], P50Ms: times[0]})
		report(to, m.Version, w.handshakes())
		if done := moveSettled(ctx, op, mv.ID); done.State != api.MoveDone || done.Devices.Switched != n {
			b.Fatalf("move after the handshakes: %s %+v", done.State, done.Devices)
		}
		from, to = to, from
		b.StartTimer()
	}
	b.StopTimer()
	// Failover: each replica in turn is killed (SIGKILL) while every
	// long-poll is parked; its devices poll again and the next replica
	// takes them (as a balancer gives them one). Measured from the kill to
	// each such device's poll being sent to a live replica; the longest is
	// the longest any device went without its map's long-poll.
	var foP50, foP99, foMax []float64
	kills := 3
	if v, err := strconv.Atoi(os.Getenv("RUNOS_FANOUT_KILLS")); err == nil && v >= 0 {
		kills = v
	}
	for k := range w.reps {
		if replicas < 2 || k == kills {
			break
		}
		w.waitHeld()
		var per []int
		for j := range w.reps {
			per = append(per, w.watchers(j))
		}
		b.Logf("before kill %d: watchers %v", k+1, per)
		ts := devs.failover(k, func() time.Time { return w.kill(k) })
		f := []float64{quantileMS(ts, 0.5, 0), quantileMS(ts, 0.99, 0), quantileMS(ts, 1, 0)}
		foP50, foP99, foMax = append(foP50, f[0]), append(foP99, f[1]), append(foMax, f[2])
		b.Logf("failover %d: replica r%d killed; %d devices re-established in p50 %.0f ms, p99 %.0f ms, max %.0f ms",
			k+1, k+1, len(ts), f[0], f[1], f[2])
		run.Failovers = append(run.Failovers, fanOutFailover{Kill: k + 1, Devices: len(ts), P50Ms: f[0], P99Ms: f[1], MaxMs: f[2]})
		w.restart(k) // back on its address, for the next round
	}
	if len(foMax) > 0 {
		run.metric(b, median(foP50), "failover-ms-p50")
		run.metric(b, median(foP99), "failover-ms-p99")
		run.metric(b, slicesMax(foMax), "failover-ms-max")
	}
	run.metric(b, median(all), "ms-all")
	run.metric(b, median(p50), "ms-p50")
	run.metric(b, median(p99), "ms-p99")
	run.metric(b, median(devCPU), "cpu-ms-devices")
	for k := range w.reps {
		run.metric(b, median(ctlCPU[k]), fmt.Sprintf("cpu-ms-r%d", k+1))
		run.metric(b, rss[k], fmt.Sprintf("rss-MB-r%d", k+1))
	}
	run.metric(b, float64(n), "devices")
	run.metric(b, float64(len(devs.procs)), "device-helpers")
	if stream {
		run.metric(b, 1, "stream")
	}
	// As the framework prints it: the timer is stopped, so Elapsed is the
	// timed part of the b.N rounds.
	run.Metrics["ns/op"] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// TestFanOutReplicaHelper is one control replica of
// BenchmarkMoveFanOutReplicas, in its own process: sqlstore on PostgreSQL, the hub fed by
// control/notify, the API over HTTPS on loopback. It answers "watchers" on
// stdin with its parked long-polls and held streams, and "die-at N" by
// killing itself at its N-th write from then; it skips unless started by
// it.
func TestFanOutReplicaHelper(t *testing.T) {
	testenv.OnlyAsHelper(t, "RUNOS_FANOUT_REPLICA", "BenchmarkMoveFanOutReplicas's own processes")
	raiseNoFile(t, 0) // its share of the devices, or after a kill more: as many as it gets
	ctx := context.Background()
	st, err := sqlstore.OpenPostgres(ctx, os.Getenv("RUNOS_FANOUT_STORE"), sqlstore.Options{AppName: os.Getenv("RUNOS_FANOUT_NAME")})
	if err != nil {
		t.Fatal(err)
	}
	var g uint64
	var vs map[string]uint64
	_ = st.View(ctx, func(r store.Reader) error {
		g, _ = r.GlobalVersion()
		vs, _ = r.AllTopicVersions()
		return nil
	})
	h := hub.New(g, vs)
	logger := replicaLogger(t)
	l := notify.New(notify.Config{Connect: st.Conn, Store: st, Hub: h, Origin: st.Origin(), Logger: logger})
	ready := make(chan struct{})
	go l.Run(ctx, func() { close(ready) })
	<-ready
	// Shared by the replicas, as control takes it (assembly.go): the
	// streams' resume tokens are signed under it.
	secret, err := st.Secret(ctx, "relay-ticket", 32)
	if err != nil {
		t.Fatal(err)
	}
	// RUNOS_FANOUT_MOVE_DEADLINE: a move's deadline shorter than
	// control's 30 s, for a test that waits for it to fire.
	deadline, _ := time.ParseDuration(os.Getenv("RUNOS_FANOUT_MOVE_DEADLINE"))
	srv, err := New(Config{Store: st, Hub: h, Clock: clock.Real{}, Shared: true, RelaySecret: secret,
		MoveDeadline: deadline, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(os.Getenv("RUNOS_FANOUT_CERT"), os.Getenv("RUNOS_FANOUT_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", os.Getenv("RUNOS_FANOUT_ADDR"))
	if err != nil {
		t.Fatal(err)
	}
	ln := &dyingListener{Listener: raw}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		TLSConfig: tlsCfg,
		// 10,000 devices dialling at once: handshakes that time out are
		// dialled again; not worth a line each.
		ErrorLog: log.New(io.Discard, "", 0)}
	if os.Getenv("RUNOS_FANOUT_TLSGATE") == "0" {
		go hs.ServeTLS(ln, "", "") // every handshake at once, as before control/tlsgate
	} else {
		go hs.Serve(tlsgate.Listen(ln, tlsCfg, tlsgate.Config{})) // as control serves (control/guard.go gateTLS)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 1 && f[0] == "watchers":
			fmt.Printf("watchers %d\n", h.Watchers()+srv.Streams())
		case len(f) == 1 && f[0] == "timers":
			// Whether this replica holds the timers' lease.
			fmt.Printf("timers %v\n", srv.leadsTimers())
		case len(f) == 2 && f[0] == "die-at":
			// "die-at N": killed by itself just before the N-th write
			// to any client from now (dyingListener).
			n, _ := strconv.ParseInt(f[1], 10, 64)
			ln.left.Store(n)
			fmt.Printf("die-at %d\n", n)
		}
	}
}

// leadsTimers reports whether s holds the timers' lease and acts on them.
func (s *Server) leadsTimers() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading
}

// replicaLogger is where a replica logs: nowhere, or into the file
// RUNOS_FANOUT_LOG names with the replica's name appended (a fault being
// looked into).
func replicaLogger(t *testing.T) *slog.Logger {
	path := os.Getenv("RUNOS_FANOUT_LOG")
	if path == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f, err := os.OpenFile(path+"."+os.Getenv("RUNOS_FANOUT_NAME"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return slog.New(slog.NewTextHandler(f, nil))
}

func expectLine(tb testing.TB, sc *bufio.Scanner, prefix string) []string {
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && f[0] == prefix {
			return f[1:]
		}
	}
	tb.Fatalf("helper ended before %q: %v", prefix, sc.Err())
	return nil
}

func procRSSMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
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

// pemParts returns the private key of cert as PEM, and the certificate.
func slicesMax(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
