//go:build !windows

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// TestSoak kills a part of the lab (the laptop's daemon, a gateway, or
// control) at a random moment while the laptop connects, disconnects or an
// operator moves ky3's server, starts it again, and checks after every
// round that nothing is broken and nothing hidden:
//
//   - public names resolve on the laptop (glibc, through whatever resolver
//     is in place);
//   - the laptop's resolv.conf is either the original, byte for byte, or
//     the daemon's (and the daemon's only while a cluster is connected);
//   - no route is there twice, and there is one wg1 and no other tunnel;
//   - every wanted cluster is connected with peerUp within 5 s of the parts
//     being back.
//
// Every third round is a control outage instead: control is killed, then
// the laptop's daemon or a gateway is killed and started again while
// control is still dead (each serves from the map it kept), the same
// checks hold, and again once control is back.
//
// make test runs a few rounds; RUNOS_SOAK_ROUNDS=60 runs the long form
// (about 10 minutes). RUNOS_SOAK_SEED replays a run (the seed is logged).
func TestSoak(t *testing.T) {
	rounds := 4
	if v := os.Getenv("RUNOS_SOAK_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RUNOS_SOAK_ROUNDS=%q: want a number of rounds", v)
		}
		rounds = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("RUNOS_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("RUNOS_SOAK_SEED=%q", v)
		}
		seed = n
	}
	t.Logf("soak: %d rounds, RUNOS_SOAK_SEED=%d", rounds, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host
	resolvPath := filepath.Join(w.env.Dir, "hosts", laptop, "resolv.conf")
	original, err := os.ReadFile(resolvPath)
	if err != nil {
		t.Fatal(err)
	}
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.waitStatus(laptop, 30*time.Second, "ky3 up", upOn("", "ky3"))

	s := &soak{w: w, laptop: laptop, resolvPath: resolvPath, original: original}
	for round := 1; round <= rounds; round++ {
		if round%3 == 0 {
			s.outageRound(t, round, rng)
			if t.Failed() {
				t.Fatalf("round %d broke an invariant (replay with RUNOS_SOAK_SEED=%d)", round, seed)
			}
			continue
		}
		action := s.actions()[rng.IntN(len(s.actions()))]
		victim := s.victims()[rng.IntN(len(s.victims()))]
		delay := time.Duration(rng.IntN(400)) * time.Millisecond
		t.Logf("round %d/%d: %s, kill -9 %s after %v", round, rounds, action.name, victim.name, delay)
		done := make(chan string, 1)
		go func() { done <- action.run() }()
		time.Sleep(delay)
		if err := w.lab.Stop(victim.host, victim.proc, syscall.SIGKILL, time.Second); err != nil {
			t.Fatalf("round %d: kill %s: %v", round, victim.name, err)
		}
		out := <-done
		t.Logf("round %d: %s → %s", round, action.name, strings.TrimSpace(lastLine(out)))
		if err := w.lab.Restart(t.Context(), victim.host, victim.proc); err != nil {
			t.Fatalf("round %d: start %s again: %v", round, victim.name, err)
		}
		s.check(t, round)
		if t.Failed() {
			t.Fatalf("round %d broke an invariant (replay with RUNOS_SOAK_SEED=%d)", round, seed)
		}
	}
	w.must(laptop, nil, "runos", "vpn", "down")
	if b, _ := os.ReadFile(resolvPath); string(b) != string(original) {
		t.Errorf("after down resolv.conf is\n%s", b)
	}
}

// outageRound connects both clusters, kills control, then a daemon or
// gateway picked by rng, starts that one again with control still dead,
// checks, and brings control back.
func (s *soak) outageRound(t *testing.T, round int, rng *rand.Rand) {
	victims := s.victims()
	victims = slices.DeleteFunc(victims, func(v soakVictim) bool { return v.proc == "control" })
	victim := victims[rng.IntN(len(victims))]
	for _, cid := range []string{"ky3", "xym"} { // something to keep: both wanted and up first
		s.w.must(s.laptop, nil, "runos", "vpn", "connect", cid, "--timeout", "20s")
	}
	t.Logf("round %d: ky3 and xym up; control down, kill -9 %s and start it again", round, victim.name)
	if err := s.w.lab.Stop("control", "control", syscall.SIGKILL, time.Second); err != nil {
		t.Fatalf("round %d: kill control: %v", round, err)
	}
	if err := s.w.lab.Stop(victim.host, victim.proc, syscall.SIGKILL, time.Second); err != nil {
		t.Fatalf("round %d: kill %s: %v", round, victim.name, err)
	}
	var err error
	if victim.proc == "vpnd" {
		err = s.w.lab.Restart(t.Context(), victim.host, victim.proc) // ready: its socket answers
	} else {
		err = s.w.lab.StartAgain(victim.host, victim.proc) // a gateway's readiness is control's to see
	}
	if err != nil {
		t.Fatalf("round %d: start %s again: %v", round, victim.name, err)
	}
	within := 5 * time.Second
	if victim.proc == "gateway" {
		// The laptop hears of a gateway's restart from control, which is
		// down: its own liveness finds the server forgot the session
		// (no answer for 5 s, then a handshake), so allow that much more.
		within += 5 * time.Second
	}
	s.checkWithin(t, round, within)
	if err := s.w.lab.Restart(t.Context(), "control", "control"); err != nil {
		t.Fatalf("round %d: start control again: %v", round, err)
	}
	s.check(t, round)
}

type soak struct {
	w          *world
	laptop     string
	resolvPath string
	original   []byte
}

type soakAction struct {
	name string
	run  func() string // the command's output (it may fail: a part dies under it)
}

type soakVictim struct{ name, host, proc string }

func (s *soak) actions() []soakAction {
	run := func(argv ...string) func() string {
		return func() string {
			out, err := s.w.run(s.laptop, nil, argv...)
			if err != nil {
				return "failed: " + out
			}
			return out
		}
	}
	return []soakAction{
		{"connect xym", run("runos", "vpn", "connect", "xym", "--timeout", "10s")},
		{"disconnect xym", run("runos", "vpn", "disconnect", "xym")},
		{"connect ky3", run("runos", "vpn", "connect", "ky3", "--timeout", "10s")},
		{"disconnect ky3", run("runos", "vpn", "disconnect", "ky3")},
		{"move ky3", func() string {
			m, out, err := s.w.move(s.otherKy3Node())
			if err != nil {
				return "failed: " + out
			}
			return m.State
		}},
	}
}

func (s *soak) victims() []soakVictim {
	return []soakVictim{
		{"the laptop's daemon", s.laptop, "vpnd"},
		{"control", "control", "control"},
		{"ky3-n1's gateway", "ky3-n1", "gateway"},
		{"ky3-n2's gateway", "ky3-n2", "gateway"},
		{"xym-n1's gateway", "xym-n1", "gateway"},
	}
}

// otherKy3Node is the node ky3's server is not on (n2 when control cannot say).
func (s *soak) otherKy3Node() string {
	ctl, err := s.w.lab.APIClient("control", s.w.env.OperatorToken)
	if err != nil {
		return "n2"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ss, err := ctl.VPNServices(ctx, "ky3")
	if err != nil || len(ss) == 0 || ss[0].NodeID != "n2" {
		return "n2"
	}
	return "n1"
}

// check verifies the invariants once the parts are back.
func (s *soak) check(t *testing.T, round int) { s.checkWithin(t, round, 5*time.Second) }

// checkWithin is check with the wanted clusters given within to be up and
// carrying traffic.
func (s *soak) checkWithin(t *testing.T, round int, within time.Duration) {
	t.Helper()
	w := s.w
	back := time.Now()
	var st *localapi.Status
	ctx, cancel := context.WithTimeout(context.Background(), within)
	err := w.daemon(s.laptop).Watch(ctx, func(x *localapi.Status) bool {
		st = x
		return !allWantedUp(x)
	})
	cancel()
	if st == nil || !allWantedUp(st) {
		t.Errorf("round %d: the wanted clusters are not all up %v after the parts came back (%v):\n%s", round, within, err, clusterLines(st))
	} else {
		// Up means carrying traffic, not only a status: each wanted
		// cluster's page through the tunnel, within the same 5 s.
		for _, c := range st.Clusters {
			if !c.Wanted {
				continue
			}
			for {
				pctx, pcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				body, err := w.lab.Get(pctx, s.laptop, "http://"+c.Server.Address+"/")
				pcancel()
				if err == nil && strings.Contains(body, "cluster="+c.CID) {
					break
				}
				if time.Since(back) > within {
					t.Errorf("round %d: %s shows up but carries no traffic %v after the parts came back: %v\n%s", round, c.CID, within, err, clusterLines(st))
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		t.Logf("round %d: every wanted cluster up and carrying traffic %v after the parts came back (%s)", round, time.Since(back).Round(time.Millisecond), wantedList(st))
	}
	if out, err := w.run(s.laptop, nil, "getent", "ahostsv4", "www.example.test"); err != nil || !strings.Contains(out, "192.0.2.80") {
		t.Errorf("round %d: a public name does not resolve on the laptop: %q %v", round, out, err)
	}
	rc, err := os.ReadFile(s.resolvPath)
	switch {
	case err != nil:
		t.Errorf("round %d: resolv.conf: %v", round, err)
	case string(rc) == string(s.original):
		if st != nil && anyConnected(st) && st.DNS.Mode == "resolv.conf" {
			t.Errorf("round %d: a cluster is connected but resolv.conf is the original", round)
		}
	case strings.HasPrefix(string(rc), "# Generated by runos vpnd") && strings.Contains(string(rc), "\nnameserver 127.0.80.53\n"):
		if st != nil && !anyConnected(st) {
			t.Errorf("round %d: no cluster is connected but resolv.conf is still the daemon's:\n%s", round, rc)
		}
	default:
		t.Errorf("round %d: resolv.conf is neither the original nor the daemon's:\n%q", round, rc)
	}
	routes := w.stdout(s.laptop, nil, "ip", "-4", "route", "show", "table", "all")
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(routes), "\n") {
		if seen[l] {
			t.Errorf("round %d: route %q is there twice:\n%s", round, l, routes)
		}
		seen[l] = true
	}
	links := w.stdout(s.laptop, nil, "ip", "-o", "link", "show", "type", "tun")
	if n := strings.Count(links, ": wg1:"); n != 1 || strings.Count(strings.TrimSpace(links), "\n") != 0 {
		t.Errorf("round %d: tunnels on the laptop:\n%s", round, links)
	}
}

func allWantedUp(st *localapi.Status) bool {
	if st.Session.State != localapi.SessionSignedIn {
		return false
	}
	for _, c := range st.Clusters {
		if c.Wanted && (c.State != localapi.ClusterConnected || !c.PeerUp) {
			return false
		}
	}
	return true
}

func anyConnected(st *localapi.Status) bool {
	for _, c := range st.Clusters {
		if c.State == localapi.ClusterConnected {
			return true
		}
	}
	return false
}

func wantedList(st *localapi.Status) string {
	var out []string
	for _, c := range st.Clusters {
		if c.Wanted {
			out = append(out, c.CID+"@"+c.Server.NodeID)
		}
	}
	if len(out) == 0 {
		return "none wanted"
	}
	return strings.Join(out, ", ")
}

func clusterLines(st *localapi.Status) string {
	if st == nil {
		return "(no status)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "session %s %s\n", st.Session.State, st.Session.Error)
	for _, c := range st.Clusters {
		fmt.Fprintf(&b, "%s wanted=%v %s peerUp=%v node=%s err=%q\n", c.CID, c.Wanted, c.State, c.PeerUp, c.Server.NodeID, c.Error)
	}
	return b.String()
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
