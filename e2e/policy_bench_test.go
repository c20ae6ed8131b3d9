//go:build !windows

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/bench/labbench"
)

// BenchmarkPolicyPropagation records issue 23's first number: how long
// after control answers `PUT …/policy` every gateway enforcing the policy
// applies it to packets. A laptop connected to ky3 and xym (the lab's two
// serving gateways, ky3-n1 and xym-n1: every gateway a policy of this
// account touches) opens a TCP connection to each VPN node's web app
// every 5 ms; the policy alternates between letting port 80 through and
// refusing it. A gateway enforces the change at the start of the first
// probe that got through after a refusal (refused → allowed: a dropped
// SYN is not retried within the probe's 500 ms), or of the first refused
// probe after the last one that got through (allowed → refused). The
// policy is set through the API from the laptop, so its answer is timed
// without a CLI's start; RUNOS_BENCH_POLICY_FILLER more rules for other
// groups ride in every document (a realistic size, compiled on each map).
func BenchmarkPolicyPropagation(b *testing.B) {
	changes := benchEnvInt(b, "RUNOS_BENCH_POLICY_CHANGES", 20)
	filler := benchEnvInt(b, "RUNOS_BENCH_POLICY_FILLER", 0)
	w := newWorld(b, 1, 0)
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.must(laptop, nil, "runos", "vpn", "connect", "xym")
	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3 and xym", upOn("", "ky3", "xym"))
	var probes []*prober
	for _, cid := range []string{"ky3", "xym"} {
		c, _ := cluster(st, cid)
		p := w.probe(laptop, cid+"-"+c.Server.NodeID, c.Server.Address+":80", 5*time.Millisecond)
		b.Cleanup(p.stop)
		probes = append(probes, p)
	}
	doc := func(version int, allowed bool) string {
		var s strings.Builder
		fmt.Fprintf(&s, "version %d\n", version)
		writeFiller(&s, filler, "")
		for _, cid := range []string{"ky3", "xym"} {
			if allowed {
				fmt.Fprintf(&s, "allow * -> %s: *\n", cid)
			} else {
				fmt.Fprintf(&s, "allow * -> %s: 10.96.0.20:5432\n", cid)
			}
		}
		return s.String()
	}
	op, aid := w.operator(), w.policyAID(doc(1, false))
	res := newPolicyResult("policy-propagation", "RUNOS_E2E=1 RUNOS_BENCH_RESULTS=../bench/results/policy-20261205 "+
		"RUNOS_BENCH_POLICY_FILLER="+strconv.Itoa(filler)+" go test ./e2e/ -run '^$' -bench '^BenchmarkPolicyPropagation$' -timeout 20m")
	res.Params["changes"], res.Params["fillerRules"], res.Params["probeIntervalMs"] = changes, filler, 5
	res.Params["gateways"] = []string{probes[0].host, probes[1].host}

	type change struct {
		Version     int                `json:"version"`
		Allowed     bool               `json:"allowed"`
		APIMs       float64            `json:"apiMs"`        // PUT sent → answered
		FromAnswer  map[string]float64 `json:"fromAnswerMs"` // answer → gateway enforcing (negative: before the answer)
		FromRequest map[string]float64 `json:"fromRequestMs"`
	}
	var detail []change
	var lastAns, lastReq, apiMs []float64
	// Version 1 (set by policyAID) refuses; the first change lets through.
	allowed := false
	for _, p := range probes {
		p.await(b, time.Now().Add(-time.Second), allowed, 15*time.Second)
	}
	b.ResetTimer()
	for i := range changes {
		allowed = !allowed
		time.Sleep(300 * time.Millisecond) // the probes settle on the state before
		sent := time.Now()
		if _, err := op.SetPolicy(b.Context(), aid, doc(i+2, allowed)); err != nil {
			b.Fatal(err)
		}
		answered := time.Now()
		c := change{Version: i + 2, Allowed: allowed, APIMs: labbench.Ms(answered.Sub(sent)),
			FromAnswer: map[string]float64{}, FromRequest: map[string]float64{}}
		worstAns, worstReq := -1e9, -1e9
		for _, p := range probes {
			at := p.await(b, sent, allowed, 10*time.Second)
			c.FromAnswer[p.host], c.FromRequest[p.host] = labbench.Ms(at.Sub(answered)), labbench.Ms(at.Sub(sent))
			worstAns, worstReq = max(worstAns, c.FromAnswer[p.host]), max(worstReq, c.FromRequest[p.host])
		}
		detail = append(detail, c)
		lastAns, lastReq, apiMs = append(lastAns, worstAns), append(lastReq, worstReq), append(apiMs, c.APIMs)
	}
	b.StopTimer()
	s := res.AddSamples("answer-to-last-gateway", lastAns)
	r := res.AddSamples("request-to-last-gateway", lastReq)
	a := res.AddSamples("api-round-trip", apiMs)
	res.Detail = detail
	b.ReportMetric(s.P50, "answer-to-last-gw-p50-ms")
	b.ReportMetric(s.P99, "answer-to-last-gw-p99-ms")
	b.ReportMetric(r.P50, "request-to-last-gw-p50-ms")
	b.ReportMetric(r.P99, "request-to-last-gw-p99-ms")
	b.ReportMetric(a.P50, "api-p50-ms")
	savePolicyResult(b, res)
}

// prober opens a TCP connection to addr from a laptop every interval and
// keeps each attempt's start and outcome.
type prober struct {
	host string // the gateway behind addr
	mu   sync.Mutex
	done []probeOutcome // in order of completion
	stop func()
}

type probeOutcome struct {
	start time.Time
	ok    bool
}

func (w *world) probe(laptop, gateway, addr string, interval time.Duration) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{host: gateway}
	var wg sync.WaitGroup
	p.stop = func() { cancel(); wg.Wait() }
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				dctx, dcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				c, err := w.lab.Dial(dctx, laptop, "tcp", addr)
				dcancel()
				if err == nil {
					c.Close()
				}
				if ctx.Err() != nil {
					return
				}
				p.mu.Lock()
				p.done = append(p.done, probeOutcome{start, err == nil})
				p.mu.Unlock()
			}()
		}
	}()
	return p
}

// await waits until the probes started after since show the gateway
// applying allowed, and returns when it began: refused → allowed, the
// start of the first probe that got through; allowed → refused, the start
// of the first refused probe after the last one that got through, once 40
// refused probes in a row (200 ms) and nothing since say it holds.
func (p *prober) await(b *testing.B, since time.Time, allowed bool, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		p.mu.Lock()
		var outs []probeOutcome
		for _, o := range p.done {
			if !o.start.Before(since) {
				outs = append(outs, o)
			}
		}
		p.mu.Unlock()
		slices.SortFunc(outs, func(a, b probeOutcome) int { return a.start.Compare(b.start) })
		if allowed {
			for _, o := range outs {
				if o.ok {
					return o.start
				}
			}
			continue
		}
		first := -1
		for i, o := range outs {
			if o.ok {
				first = -1
			} else if first < 0 {
				first = i
			}
		}
		if first >= 0 && len(outs)-first >= 40 {
			return outs[first].start
		}
	}
	b.Fatalf("%s: the probes do not show the policy %s within %s", p.host, map[bool]string{true: "allowing", false: "refusing"}[allowed], timeout)
	return time.Time{}
}

// writeFiller writes n allow rules for twenty groups over the clusters'
// services, pods and nodes with ports and protocols varied: the bulk of a
// large team's policy. member ("": none) is in two of the groups, whose
// rules then count in its filter without deciding for its transfers.
func writeFiller(s *strings.Builder, n int, member string) {
	if n == 0 {
		return
	}
	for g := range 20 {
		members := fmt.Sprintf("member%02d@rjwrn.example.com, other%02d@rjwrn.example.com", g, g)
		if member != "" && (g == 7 || g == 13) {
			members += ", " + member
		}
		fmt.Fprintf(s, "group team%02d: %s\n", g, members)
	}
	for i := range n {
		cid := "ky3"
		if i%5 == 4 {
			cid = "xym"
		}
		fmt.Fprintf(s, "allow group:team%02d -> %s: %s\n", i%20, cid, fillerDest(i))
	}
}

// fillerDest is the i-th filler rule's destinations.
func fillerDest(i int) string {
	x, y := i/250%256, i%250+1
	switch i % 4 {
	case 0:
		return fmt.Sprintf("10.%d.%d.0/24:%d-%d/tcp", 96+i%16, x, 1000+i%5000, 1010+i%5000)
	case 1:
		return fmt.Sprintf("10.96.%d.%d:%d/udp, 10.96.%d.%d:%d/tcp", x, y, 2000+i, x, y, 3000+i)
	case 2:
		return fmt.Sprintf("10.244.%d.0/26:443, 10.10.0.%d:22/tcp", y, y)
	default:
		return fmt.Sprintf("172.16.%d.%d/30, 10.96.%d.%d:5432/tcp", x, y&^3, x, y)
	}
}

// policyAID sets the account's first policy document with the CLI, as an
// operator would, and returns the account's id from `runos policy get`.
func (w *world) policyAID(doc string) string {
	w.t.Helper()
	op := []string{"RUNOS_TOKEN=" + w.env.OperatorToken}
	file := filepath.Join(w.env.Dir, "policy.txt")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		w.t.Fatal(err)
	}
	w.must(w.env.Client.Host, op, "runos", "policy", "set", file)
	var p api.Policy
	if out := w.stdout(w.env.Client.Host, op, "runos", "policy", "get", "--json"); json.Unmarshal([]byte(out), &p) != nil || p.AID == "" {
		w.t.Fatalf("runos policy get --json: %q", out)
	}
	return p.AID
}

// benchEnvInt is a benchmark's amount of work from the environment.
func benchEnvInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// newPolicyResult starts a results document (bench/labbench's) with the
// machine and commit.
func newPolicyResult(name, reproduce string) *labbench.Result {
	m := labbench.DescribeMachine(os.DirFS("/"))
	if out, err := exec.Command("git", "-C", "..", "describe", "--always", "--dirty").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	m.Note = os.Getenv("RUNOS_BENCH_MACHINE")
	r := labbench.NewResult(name, time.Now(), m)
	r.Reproduce = reproduce
	return r
}

// savePolicyResult writes it to RUNOS_BENCH_RESULTS (default bench/results).
func savePolicyResult(b *testing.B, r *labbench.Result) {
	dir := os.Getenv("RUNOS_BENCH_RESULTS")
	if dir == "" {
		dir = filepath.Join("..", "bench", "results")
	}
	path, err := r.Write(dir, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("results: %s", path)
}

// thousandRules is a policy of 1,000 allow rules (the filler's 999 for
// twenty groups, then the one letting user reach server:5201/tcp in ky3),
// user a member of two of the groups, and the line of the last rule.
func thousandRules(user, server string) (doc string, line int) {
	var s strings.Builder
	s.WriteString("version 1\n")
	writeFiller(&s, 999, user)
	fmt.Fprintf(&s, "allow group:team13 -> ky3: %s:5201/tcp\n", server)
	return s.String(), strings.Count(s.String(), "\n")
}
