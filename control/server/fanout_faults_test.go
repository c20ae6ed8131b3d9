//go:build linux

package server

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/internal/pgtest"
)

// The fan-out's faults (issue 25): a move's switch reaching devices that
// hold push streams on three replicas over PostgreSQL, broken at its worst
// moments. Each test checks that no device is left on the old map, that
// the move finishes with every device counted, and that the replicas say
// what happened (their streams, the devices' errors).

const faultDevices = 1500

// faultWorld is three replicas and faultDevices devices streaming their
// maps from them (device g on replica g mod 3), a move of ky3 from n1 to
// n2 prepared (the standby has its map): what is left is the switch.
type faultWorld struct {
	*replicaWorld
	devs    *deviceHelpers
	move    *api.Move
	standby uint64 // the standby's map version, which its report switches on
}

func newFaultWorld(t *testing.T) *faultWorld {
	pg := pgtest.Start(t)
	return newFaultWorldOn(t, pg)
}

func newFaultWorldOn(t *testing.T, pg *pgtest.Server) *faultWorld {
	raiseNoFile(t, 0)
	t.Setenv("RUNOS_FANOUT_QUIET", "1") // the devices' helper counts its streams' errors instead of printing each
	w := &faultWorld{replicaWorld: newReplicaWorld(t, pg, 3, faultDevices)}
	ctx := context.Background()
	w.report("n1", 1<<40, nil)
	w.devs = startDeviceHelpers(t, w.dir, w.tokens, w.urls, w.caFile, true)
	w.waitHeld()
	w.report("n2", 0, nil)
	mv, err := w.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil || mv.State != api.MovePreparing {
		t.Fatalf("start move: %+v, %v", mv, err)
	}
	m, err := w.gateway("n2").GatewayMap(ctx, 0, 0)
	if err != nil || m.Serve == nil || len(m.Serve.Peers) != faultDevices {
		t.Fatalf("the standby's map: %+v, %v", m, err)
	}
	w.move, w.standby = mv, m.Version
	w.waitHeld()
	// Every device counts the first map naming n2's key from now.
	w.devs.all("round 0 "+w.nodeKeys["n2"].PublicKey().String(), "armed")
	return w
}

// switchOver commits the switch (n2 reports listening on its map) on
// replica 1.
func (w *faultWorld) switchOver() time.Time {
	t0 := time.Now()
	w.report("n2", w.standby, nil)
	return t0
}

// everyDeviceSwitched waits, at most d, until every device has a map
// naming n2, and returns the last arrival after t0; it fails with how
// many had it and the errors their streams ended with.
func (w *faultWorld) everyDeviceSwitched(t *testing.T, t0 time.Time, d time.Duration) time.Duration {
	t.Helper()
	type line struct {
		k      int
		fields []string
	}
	lines := make(chan line, 64)
	for k, h := range w.devs.procs {
		go func() {
			for h.lines.Scan() {
				f := strings.Fields(h.lines.Text())
				if len(f) > 0 && (f[0] == "waiting" || f[0] == "done") {
					lines <- line{k, f}
					if f[0] == "done" {
						return
					}
				}
			}
			lines <- line{k, nil}
		}()
	}
	deadline := time.After(d)
	progress := make([]string, len(w.devs.procs))
	var last int64
	for left := len(w.devs.procs); left > 0; {
		select {
		case l := <-lines:
			switch {
			case l.fields == nil:
				t.Fatalf("device helper %d ended before every device had the switch", l.k)
			case l.fields[0] == "waiting":
				progress[l.k] = strings.Join(l.fields[1:], " ")
			default:
				ns, _ := strconv.ParseInt(l.fields[3], 10, 64)
				last = max(last, ns)
				left--
			}
		case <-deadline:
			t.Fatalf("after %s not every device has the map naming n2 (helpers' \"got of errors\": %v)", d, progress)
		}
	}
	return time.Unix(0, last).Sub(t0)
}

// errors is the devices' streams' errors so far, by kind.
func (w *faultWorld) errors() string {
	var out []string
	for _, f := range w.devs.all("errors", "errors") {
		out = append(out, f...)
	}
	return strings.Join(out, " ")
}

// moveDone reports every device's handshake with n2 and checks the move
// finishes with all of them switched.
func (w *faultWorld) moveDone(t *testing.T) {
	t.Helper()
	w.report("n2", w.standby, w.handshakes())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if done := moveSettled(ctx, w.op, w.move.ID); done.State != api.MoveDone || done.Devices.Switched != faultDevices {
		t.Fatalf("the move after every device's handshake: %s %+v, want done with %d switched", done.State, done.Devices, faultDevices)
	}
}

// alive fails unless replica k still runs and answers (a replica that
// exited has closed its output: expectLine fails on it).
func (w *faultWorld) alive(t *testing.T, k int) {
	t.Helper()
	w.watchers(k)
}

// signal sends sig to replica k's process.
func (w *faultWorld) signal(t *testing.T, k int, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(w.reps[k].cmd.Process.Pid, sig); err != nil {
		t.Fatalf("%s to r%d: %v", sig, k+1, err)
	}
}

// TestFanOutReplicaKilledMidWrite: replica 2 kills itself (SIGKILL) in the
// middle of writing the switch to its streams: some of its devices have
// the new map, the rest are cut off before theirs. Every device ends up
// with the map naming n2 (those cut off resume on the survivors from the
// version they had), the survivors hold every device's stream, and the
// move finishes with all of them.
func TestFanOutReplicaKilledMidWrite(t *testing.T) {
	w := newFaultWorld(t)
	const victim = 1 // r2
	share := w.watchers(victim)
	dieAt := share/2 + 1 // half its streams written, then death
	fmt.Fprintf(w.reps[victim].in, "die-at %d\n", dieAt)
	expectLine(t, w.reps[victim].lines, "die-at")
	t0 := w.switchOver()
	// The replica says it is dying, then is killed by its own signal.
	expectLine(t, w.reps[victim].lines, "dying")
	err := w.reps[victim].cmd.Wait()
	killed := time.Now()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ProcessState.String() != "signal: killed" {
		t.Fatalf("r2 after its die-at: %v, want killed by its SIGKILL", err)
	}
	t.Logf("r2 held %d streams; killed %s after the commit, before its write %d", share, killed.Sub(t0).Round(time.Millisecond), dieAt)
	last := w.everyDeviceSwitched(t, t0, 2*time.Minute)
	t.Logf("every device has the map naming n2 %s after the commit; the streams' errors: %s", last.Round(time.Millisecond), w.errors())
	w.waitHeld(victim) // the survivors hold all of them
	for _, k := range []int{0, 2} {
		w.alive(t, k)
	}
	w.moveDone(t)
}

// TestFanOutDatabaseDown: PostgreSQL is stopped (a fast shutdown: every
// connection cut) while the switch fans out, and started again 3 s later.
// So that the outage falls inside the fan-out every time, replicas 2 and
// 3 are paused (SIGSTOP) while replica 1 commits and until the database is
// down: they hear of the switch, if its notification reached them, or
// read their devices' maps only with the database gone. No replica exits;
// a stream whose read failed ends with control's 503 "store unavailable"
// (no other answer of control's) and resumes; once the database is back every device has the map naming
// n2 and the move finishes with all of them.
func TestFanOutDatabaseDown(t *testing.T) {
	pg := pgtest.Start(t)
	w := newFaultWorldOn(t, pg)
	paused := []int{1, 2}
	for _, k := range paused {
		w.signal(t, k, syscall.SIGSTOP)
	}
	t0 := w.switchOver()
	pg.Stop()
	stopped := time.Now()
	for _, k := range paused {
		w.signal(t, k, syscall.SIGCONT)
	}
	t.Logf("database stopped %s after the commit; r2 and r3 resumed", stopped.Sub(t0).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	for k := range w.reps {
		w.alive(t, k)
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	t.Logf("database back after %s", time.Since(stopped).Round(time.Millisecond))
	last := w.everyDeviceSwitched(t, t0, 2*time.Minute)
	errs := w.errors()
	t.Logf("every device has the map naming n2 %s after the commit; the streams' errors: %s", last.Round(time.Millisecond), errs)
	// Control's own answers say what happened: the store is unavailable,
	// never a sign-in that ended or a device that is gone (which would
	// send a daemon to sign in again or drop the cluster). Connections
	// lost under the retries' load (handshakes or headers too slow, most
	// under -race) end as transport errors, and those devices resume.
	for _, kind := range strings.Split(strings.ReplaceAll(errs, " ", ","), ",") {
		if name, _, _ := strings.Cut(kind, "="); name != "-" && name != "503-store-unavailable" && name != "transport" {
			t.Errorf("a stream ended with %s: with the database down control answers 503 store unavailable", name)
		}
	}
	w.waitHeld()
	for k := range w.reps {
		w.alive(t, k)
	}
	w.moveDone(t)
}

// TestMoveDeadlineAfterDatabaseDown: a move's switch is committed, then
// PostgreSQL is stopped and the replica acting on timers is killed (its
// armed deadline dies with it); the deadline passes while the database is
// down, and it is started again. A surviving replica takes the timers'
// lease once it can and arms the move's deadline from the store, already
// due: the move finishes at its deadline with what it had (no device
// handshaked with n2 here), and n1 stops serving.
func TestMoveDeadlineAfterDatabaseDown(t *testing.T) {
	const devices, deadline = 20, 3 * time.Second
	pg := pgtest.Start(t)
	t.Setenv("RUNOS_FANOUT_MOVE_DEADLINE", deadline.String())
	w := newReplicaWorld(t, pg, 3, devices)
	ctx := context.Background()
	w.report("n1", 1<<40, nil)
	w.report("n2", 0, nil)
	mv, err := w.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil || mv.State != api.MovePreparing {
		t.Fatalf("start move: %+v, %v", mv, err)
	}
	m, err := w.gateway("n2").GatewayMap(ctx, 0, 0)
	if err != nil || m.Serve == nil {
		t.Fatalf("the standby's map: %+v, %v", m, err)
	}
	holder := -1
	for k := range w.reps {
		if w.ask(k, "timers")[0] == "true" {
			holder = k
		}
	}
	if holder < 0 {
		t.Fatal("no replica holds the timers' lease")
	}
	w.report("n2", m.Version, nil) // the switch
	switched := time.Now()
	if got, err := w.op.Move(ctx, mv.ID, 0, 0); err != nil || got.State != api.MoveSwitching {
		t.Fatalf("after the switch: %+v, %v", got, err)
	}
	pg.Stop()
	w.kill(holder)
	w.reps[holder] = nil // closed by the world: it is dead
	down := time.Now()
	t.Logf("database stopped and r%d (the timers' holder) killed %s after the switch", holder+1, down.Sub(switched).Round(time.Millisecond))
	time.Sleep(time.Until(switched.Add(deadline + 2*time.Second))) // the deadline passes with nobody to act on it
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	survivor := (holder + 1) % len(w.reps)
	op := &api.Client{BaseURL: w.urls[survivor], Token: opToken, HTTP: w.hc}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := moveSettled(wait, op, mv.ID)
	if done == nil || done.State != api.MoveDone || done.Devices.Switched != 0 || done.Devices.Total != devices {
		t.Fatalf("the move after the database came back: %+v, want done at its deadline with 0/%d switched", done, devices)
	}
	t.Logf("the move done %s after the database came back (deadline due %s before)", time.Since(back).Round(time.Millisecond),
		back.Sub(switched.Add(deadline)).Round(time.Millisecond))
	leaders := 0
	for k, r := range w.reps {
		if r != nil && w.ask(k, "timers")[0] == "true" {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d surviving replicas hold the timers' lease, want 1", leaders)
	}
	n1 := &api.Client{BaseURL: w.urls[survivor], Token: enroll("ky3", "n1"), HTTP: w.hc}
	if m1, err := n1.GatewayMap(ctx, 0, 0); err != nil || m1.Serve != nil {
		t.Fatalf("n1 after the deadline: %+v, %v (want no server to serve)", m1, err)
	}
}
