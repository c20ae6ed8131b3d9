//go:build linux

package labbench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/lab"
)

// laptopSwitch is one laptop's view of one move.
type laptopSwitch struct {
	Host string `json:"host"`
	// StatusMs: from the command to this laptop's watch stream showing the
	// new node with peerUp.
	StatusMs float64 `json:"statusMs"`
	// HandshakeMs: from the command to the handshake with the new node,
	// as this laptop's WireGuard device stamped it.
	HandshakeMs float64 `json:"handshakeMs"`
}

// moveRecord is one move of the benchmark.
type moveRecord struct {
	N        int    `json:"n"`
	ID       string `json:"id"`
	From     string `json:"from"`
	To       string `json:"to"`
	SwitchMs int64  `json:"switchMs"` // control's: from taking the move to the last device's handshake
	// PrepareMs is control's time from the command to the target
	// listening (when devices are told).
	PrepareMs    float64        `json:"prepareMs"`
	DoneMs       float64        `json:"doneMs"` // command to the move reading done, here
	Total        int            `json:"total"`
	Switched     int            `json:"switched"`
	LastLaptopMs float64        `json:"lastLaptopMs"` // the slowest laptop's StatusMs
	Laptops      []laptopSwitch `json:"laptops"`
}

// BenchmarkLabMoveSwitch is issue 3's headline number: RUNOS_BENCH_CLIENTS
// laptops (default 10), each its own namespace and daemon, connected to
// ky3; its VPN server moves n1 → n2 → n1 … RUNOS_BENCH_MOVES times
// (default 20), RUNOS_BENCH_MOVE_PAUSE apart (default 300ms). For each
// move it records control's switchMs and, independently, each laptop's
// time from the command to its daemon's watch stream showing the new node
// with peerUp. The work is fixed by those variables, not by b.N.
//
// RUNOS_BENCH_LONG_POLL=1 runs every daemon and gateway with --long-poll
// (lab.Options.LongPoll), as clients before push streams followed
// control: the same moves over long-polls, for a comparison in one
// session. Its result is named lab-move-switch-long-poll.
func BenchmarkLabMoveSwitch(b *testing.B) { fixedWork(b, moveSwitchOn(lab.StoreSQLite, 1)) }

// BenchmarkLabMoveSwitchStores is the same moves twice in one run: on
// SQLite with one control, then on PostgreSQL with three control replicas
// behind HAProxy (issue 13), each in a lab of its own.
func BenchmarkLabMoveSwitchStores(b *testing.B) {
	b.Run("sqlite-1", func(b *testing.B) { fixedWork(b, moveSwitchOn(lab.StoreSQLite, 1)) })
	b.Run("postgres-3", func(b *testing.B) { fixedWork(b, moveSwitchOn(lab.StorePostgres, 3)) })
}

func moveSwitchOn(store string, replicas int) func(*testing.B, *metrics) {
	return func(b *testing.B, m *metrics) { benchMoveSwitch(b, m, store, replicas) }
}

func benchMoveSwitch(b *testing.B, m *metrics, store string, replicas int) {
	clients := envInt(b, "RUNOS_BENCH_CLIENTS", 10)
	moves := envInt(b, "RUNOS_BENCH_MOVES", 20)
	pause := envDuration(b, "RUNOS_BENCH_MOVE_PAUSE", 300*time.Millisecond)
	longPoll := os.Getenv("RUNOS_BENCH_LONG_POLL") == "1"
	w := newWorldWith(b, lab.Options{Clients: clients, Store: store, ControlReplicas: replicas, LongPoll: longPoll})
	name, bench := "lab-move-switch", "BenchmarkLabMoveSwitch"
	if store != lab.StoreSQLite || replicas != 1 || strings.Contains(b.Name(), "/") {
		name, bench = fmt.Sprintf("lab-move-switch-%s-%d", store, replicas), "BenchmarkLabMoveSwitchStores"
	}
	env := fmt.Sprintf("RUNOS_BENCH_CLIENTS=%d RUNOS_BENCH_MOVES=%d", clients, moves)
	if longPoll {
		name, env = name+"-long-poll", env+" RUNOS_BENCH_LONG_POLL=1"
	}
	res := w.newResult(name, fmt.Sprintf("%s go test ./bench/labbench/ -run '^$' -bench '^%s$' -timeout 30m", env, bench))
	res.Params["clients"], res.Params["moves"], res.Params["pause"] = clients, moves, pause.String()
	res.Params["store"], res.Params["replicas"], res.Params["longPoll"] = store, replicas, longPoll

	w.upAll("ky3")
	var fs []*Follower
	pids := map[string]int{}
	for _, c := range w.env.Clients {
		fs = append(fs, w.follow(c.Host))
		pids[c.Host] = w.pid(c.Host, "vpnd")
	}
	w.waitEach(fs, "every laptop on ky3's n1", 30*time.Second, UpOn("ky3", "n1"))
	ky3, _ := w.env.Cluster("ky3")
	op := w.apiClient(w.env.Client.Host, w.env.OperatorToken)
	if _, err := op.Me(w.ctx); err != nil { // open the connection before the clock runs
		b.Fatal(err)
	}

	var records []moveRecord
	var switchMs, laptopMs, lastMs, handshakeMs, lagMs, prepareMs []float64
	target := "n2"
	for i := range moves {
		time.Sleep(pause)
		r := w.moveOnce(op, ky3.VPNService.ID, target, fs)
		r.N = i + 1
		records = append(records, r)
		switchMs = append(switchMs, float64(r.SwitchMs))
		prepareMs = append(prepareMs, r.PrepareMs)
		lastMs = append(lastMs, r.LastLaptopMs)
		for _, l := range r.Laptops {
			laptopMs = append(laptopMs, l.StatusMs)
			handshakeMs = append(handshakeMs, l.HandshakeMs)
			lagMs = append(lagMs, l.StatusMs-l.HandshakeMs)
		}
		if testing.Verbose() {
			b.Logf("move %2d %s→%s: switchMs %4d (prepare %.1f), laptops: last %.1f ms", r.N, r.From, r.To, r.SwitchMs, r.PrepareMs, r.LastLaptopMs)
		}
		target = map[string]string{"n1": "n2", "n2": "n1"}[target]
	}

	for _, c := range w.env.Clients {
		if got := w.pid(c.Host, "vpnd"); got != pids[c.Host] {
			b.Errorf("%s's daemon was restarted during the moves (%d → %d)", c.Host, pids[c.Host], got)
		}
	}
	for _, kv := range []struct {
		key string
		s   []float64
	}{
		{"control-switch-ms", switchMs}, {"control-prepare-ms", prepareMs}, {"last-laptop-status-ms", lastMs},
		{"laptop-status-ms", laptopMs}, {"laptop-handshake-ms", handshakeMs}, {"laptop-status-lag-ms", lagMs},
	} {
		headline := kv.key == "control-switch-ms" || kv.key == "last-laptop-status-ms" || kv.key == "laptop-status-ms"
		logSummary(b, kv.key, res.AddSamples(kv.key, kv.s), headline)
	}
	res.Detail = records
	res.Notes = append(res.Notes,
		"control-switch-ms is control's switchMs: from its receipt of POST .../moves to the last device's handshake as the target gateway reported it",
		"laptop-status-ms is measured here, per laptop and move: from just before POST .../moves to that laptop's /v1/watch stream showing ky3 on the new node with peerUp",
		"laptop-handshake-ms is from the same start to the handshake with the new node, as the laptop's WireGuard device stamped it (lastHandshake)",
		"last-laptop-status-ms is, per move, the slowest laptop's laptop-status-ms: the laptops' own view of switchMs",
		"laptop-status-lag-ms is laptop-status-ms minus laptop-handshake-ms: how long after its handshake a daemon's status showed it")
	w.save(res)
	m.summary("switch", res.Summaries["control-switch-ms"])
	m.summary("laptop", res.Summaries["laptop-status-ms"])
	m.add(float64(len(switchMs)), "moves")
}

// moveOnce moves ky3's server to target and returns what control and every
// laptop saw.
func (w *world) moveOnce(op *api.Client, svc, target string, fs []*Follower) moveRecord {
	w.b.Helper()
	marks := make([]int, len(fs))
	for i, f := range fs {
		marks[i] = f.Mark()
	}
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	t0 := time.Now()
	m, err := op.StartMove(ctx, "ky3", svc, target)
	if err != nil {
		w.b.Fatalf("move to %s: %v", target, err)
	}
	for m.State != api.MoveDone && m.State != api.MoveFailed {
		if m, err = op.Move(ctx, m.ID, m.Version, 10*time.Second); err != nil {
			w.b.Fatalf("follow move %s: %v", m.ID, err)
		}
	}
	done := time.Since(t0)
	if m.State != api.MoveDone || m.Devices.Switched != len(fs) {
		w.b.Fatalf("move %s to %s: %s, %d/%d switched: %s\n%s", m.ID, target, m.State, m.Devices.Switched, m.Devices.Total, m.Error, steps(m))
	}
	r := moveRecord{ID: m.ID, From: m.FromNodeID, To: m.TargetNodeID, SwitchMs: m.SwitchMs,
		DoneMs: Ms(done), Total: m.Devices.Total, Switched: m.Devices.Switched}
	for _, s := range m.Steps {
		if strings.Contains(s.Text, "is listening") {
			r.PrepareMs = Ms(s.At.Sub(m.StartedAt))
			break
		}
	}
	for i, f := range fs {
		e, err := f.Wait(ctx, marks[i], UpOn("ky3", target))
		if err != nil {
			w.b.Fatalf("after move %s to %s: %v", m.ID, target, err)
		}
		c, _ := Cluster(&e.Status, "ky3")
		r.Laptops = append(r.Laptops, laptopSwitch{Host: w.env.Clients[i].Host,
			StatusMs: Ms(e.At.Sub(t0)), HandshakeMs: Ms(c.LastHandshake.Sub(t0))})
	}
	r.LastLaptopMs = slices.MaxFunc(r.Laptops, func(a, b laptopSwitch) int {
		return int(a.StatusMs*1000) - int(b.StatusMs*1000)
	}).StatusMs
	return r
}

func steps(m *api.Move) string {
	var sb strings.Builder
	for _, s := range m.Steps {
		fmt.Fprintf(&sb, "  +%.3fs %s\n", s.At.Sub(m.StartedAt).Seconds(), s.Text)
	}
	return sb.String()
}
