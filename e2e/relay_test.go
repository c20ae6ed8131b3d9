//go:build !windows

package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/internal/relaywire"
	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// relayedOn is a predicate: cid connected with a live handshake over the
// given path (direct or relay), served by node (if not "").
func relayedOn(path, node, cid string) func(*localapi.Status) bool {
	return func(s *localapi.Status) bool {
		c, ok := cluster(s, cid)
		return ok && upOn(node, cid)(s) && c.Path == path
	}
}

// pings is a steady stream of pings from a laptop (every 50 ms) with the
// time of each reply, to measure how long traffic stops.
type pings struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	at     []time.Time
}

var pingReply = regexp.MustCompile(`^\[(\d+)\.(\d+)\] \d+ bytes from`)

func (w *world) pingStream(host, addr string) *pings {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd, err := w.lab.Command(ctx, host, nil, "ping", "-D", "-n", "-i", "0.05", addr)
	if err != nil {
		w.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	p := &pings{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			m := pingReply.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			sec, _ := strconv.ParseInt(m[1], 10, 64)
			frac, _ := strconv.ParseFloat("0."+m[2], 64)
			p.mu.Lock()
			p.at = append(p.at, time.Unix(sec, int64(frac*1e9)))
			p.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	w.t.Cleanup(p.stop)
	return p
}

func (p *pings) stop() {
	p.cancel()
	<-p.done
}

// count is how many replies came so far.
func (p *pings) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.at)
}

// gapAfter is the longest stretch without a reply that began after t
// (measured to the first reply after it).
func (p *pings) gapAfter(t time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := t
	var gap time.Duration
	for _, a := range p.at {
		if a.Before(t) {
			continue
		}
		gap = max(gap, a.Sub(prev))
		prev = a
	}
	return gap
}

// waitReplies waits until n more replies came.
func (w *world) waitReplies(p *pings, n int, timeout time.Duration) {
	w.t.Helper()
	want := p.count() + n
	w.waitFor(timeout, strconv.Itoa(n)+" ping replies", func() bool { return p.count() >= want })
}

// TestRelayWhenUDPIsBlocked is issue 14's relay in the lab: the laptop's
// network lets no UDP through to any node. `runos vpn up` connects ky3 over
// the relay on the node's 443 (path relay, peerUp), the page loads, split
// DNS answers through it, the stock wg tool shows the handshake, and the
// relay carried ciphertext only. UDP coming back moves the path to direct
// within 10 s with no command; blocking it again while a ping stream runs
// moves the stream to the relay within 5 s.
func TestRelayWhenUDPIsBlocked(t *testing.T) {
	w := newWorldWith(t, lab.Options{Clients: 1, BlockUDP: true, RecordRelay: true})
	laptop := w.env.Client.Host
	start := time.Now()
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	st := w.waitStatus(laptop, 20*time.Second, "ky3 up over the relay", relayedOn(localapi.PathRelay, "n1", "ky3"))
	t.Logf("vpn up (sign-in and connect) to peerUp over the relay: %s", time.Since(start).Round(time.Millisecond))
	c, _ := cluster(st, "ky3")
	if c.Relay != "https://10.77.0.21/runos-vpn/relay" || !strings.Contains(c.PathReason, "the relay answered first") {
		t.Errorf("ky3: relay %q, reason %q", c.Relay, c.PathReason)
	}
	body, err := w.page(laptop, "http://"+c.Server.Address+"/")
	if err != nil || !strings.Contains(body, "cluster=ky3 node=n1") {
		t.Fatalf("page over the relay: %q, %v", body, err)
	}
	if got := w.getent(laptop, "app.ky3.rjwrn.example.com"); got != c.Server.Address {
		t.Errorf("app.ky3.rjwrn.example.com resolves to %q over the relay, want %s", got, c.Server.Address)
	}
	if got := w.getent(laptop, "www.example.test"); got != "192.0.2.80" {
		t.Errorf("www.example.test resolves to %q, want the LAN resolver's answer", got)
	}
	out := w.must(laptop, nil, "wg", "show", "wg1", "latest-handshakes")
	if !strings.Contains(out, c.Server.PublicKey) || strings.Contains(out, c.Server.PublicKey+"\t0") {
		t.Errorf("wg show wg1 has no handshake with ky3 over the relay:\n%s", out)
	}
	// What the relay saw: WireGuard's ciphertext, never the page.
	recs, _ := filepath.Glob(filepath.Join(w.lab.RelayRecordDir("ky3-n1"), "stream-*.bin"))
	total := 0
	for _, f := range recs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
		for _, plain := range []string{"hello from the RunOS lab", "cluster=ky3 node=n1", "app.ky3.rjwrn.example.com", "GET / HTTP/1.1"} {
			if strings.Contains(string(b), plain) {
				t.Errorf("the relay carried plaintext %q (%s)", plain, filepath.Base(f))
			}
		}
	}
	if total < len(body) {
		t.Fatalf("the relay recorded %d bytes in %d streams: the page did not go through it", total, len(recs))
	}
	// What the relay was shown: a relay ticket, never the session token
	// (a full API credential).
	tok := w.laptopPrefs(laptop).AccessToken
	reqs, _ := filepath.Glob(filepath.Join(w.lab.RelayRecordDir("ky3-n1"), "request-*.txt"))
	tickets := 0
	for _, f := range reqs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if tok == "" || strings.Contains(string(b), tok) || strings.Contains(strings.ToLower(string(b)), "authorization:") {
			t.Errorf("the relay was shown the session token (or an Authorization header) in %s:\n%s", filepath.Base(f), b)
		}
		if strings.Contains(string(b), relaywire.HeaderTicket+": rt1.") {
			tickets++
		}
	}
	if tickets == 0 {
		t.Errorf("the relay recorded %d requests, none with a relay ticket", len(reqs))
	}

	// UDP comes back: direct within 10 s, nothing typed.
	if err := w.lab.Unblock(context.Background(), laptop); err != nil {
		t.Fatal(err)
	}
	unblocked := time.Now()
	w.waitStatus(laptop, 10*time.Second, "back on UDP", relayedOn(localapi.PathDirect, "n1", "ky3"))
	t.Logf("unblocked → path direct: %s", time.Since(unblocked).Round(time.Millisecond))

	// Blocked again under a steady stream of pings: the stream resumes
	// over the relay within 5 s.
	p := w.pingStream(laptop, c.Server.Address)
	w.waitReplies(p, 20, 10*time.Second)
	blocked := time.Now()
	if err := w.lab.Block(context.Background(), laptop, lab.BlockUDP); err != nil {
		t.Fatal(err)
	}
	w.waitStatus(laptop, 10*time.Second, "relayed again", relayedOn(localapi.PathRelay, "n1", "ky3"))
	w.waitReplies(p, 20, 10*time.Second)
	gap := p.gapAfter(blocked)
	t.Logf("ping gap when UDP was blocked mid-flow: %s", gap.Round(time.Millisecond))
	if gap > 5*time.Second {
		t.Errorf("traffic stopped for %s when UDP was blocked, want it back over the relay within 5 s", gap)
	}
	// And unblocked under the stream: no gap worth the name either way.
	unblocked = time.Now()
	if err := w.lab.Unblock(context.Background(), laptop); err != nil {
		t.Fatal(err)
	}
	w.waitStatus(laptop, 10*time.Second, "direct again", relayedOn(localapi.PathDirect, "n1", "ky3"))
	w.waitReplies(p, 20, 10*time.Second)
	t.Logf("ping gap when UDP came back: %s", p.gapAfter(unblocked).Round(time.Millisecond))
	if g := p.gapAfter(unblocked); g > 5*time.Second {
		t.Errorf("traffic stopped for %s when UDP came back", g)
	}
	// The daemon logged each switch with its reason.
	log, _ := os.ReadFile(filepath.Join(w.env.Dir, "logs", laptop+".vpnd.log"))
	if n := strings.Count(string(log), `msg="cluster path changed"`); n < 4 {
		t.Errorf("%d path changes logged, want 4 (relay, direct, relay, direct)", n)
	}
}

// TestMoveWhileRelayed: the laptop is relayed when ky3's server moves from
// n1 to n2; it follows to n2 and n2's relay by itself.
func TestMoveWhileRelayed(t *testing.T) {
	w := newWorldWith(t, lab.Options{Clients: 1, BlockUDP: true})
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.waitStatus(laptop, 20*time.Second, "ky3 up over n1's relay", relayedOn(localapi.PathRelay, "n1", "ky3"))
	m, out, err := w.move("n2")
	t.Logf("move to n2:\n%s", out)
	if err != nil || m.State != "done" {
		t.Fatalf("move to n2: %v (%s)", err, m.State)
	}
	st := w.waitStatus(laptop, 15*time.Second, "ky3 up over n2's relay", relayedOn(localapi.PathRelay, "n2", "ky3"))
	c, _ := cluster(st, "ky3")
	if c.Relay != "https://198.51.100.22/runos-vpn/relay" || c.Server.Endpoint != "198.51.100.22:32768" {
		t.Errorf("after the move: relay %q endpoint %q", c.Relay, c.Server.Endpoint)
	}
	if body, err := w.page(laptop, "http://"+c.Server.Address+"/"); err != nil || !strings.Contains(body, "cluster=ky3 node=n2") {
		t.Errorf("page after the move: %q, %v", body, err)
	}
}
