//go:build !windows

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth/formlogin"
	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// Issue 13: control past one machine. Each test runs a lab with PostgreSQL
// on host db, three runos-control replicas (control-1…3) and HAProxy at
// control's address, the one URL every daemon, gateway and CLI uses.

func replicasWorld(t *testing.T, clients int, ttl time.Duration) *world {
	t.Helper()
	return newWorldWith(t, lab.Options{Clients: clients, SessionTTL: ttl, Store: lab.StorePostgres, ControlReplicas: 3})
}

var replicaHosts = []string{"control-1", "control-2", "control-3"}

// steer makes HAProxy send new requests only to the replicas named (the
// others drain: requests they hold go on, and they stay healthy).
func (w *world) steer(ready ...string) {
	w.t.Helper()
	for _, h := range replicaHosts {
		state := "drain"
		for _, r := range ready {
			if r == h {
				state = "ready"
			}
		}
		if _, err := w.lab.Balancer(context.Background(), "set server replicas/"+h+" state "+state); err != nil {
			w.t.Fatal(err)
		}
	}
}

// moveStreams ends, at the balancer, every session held by a replica not
// in keep: the laptops' push streams there end (HAProxy logs a request
// only when it ends, so a stream is in the log from then on) and the
// daemons resume them, from the last version they saw, wherever the
// balancer sends new requests.
func (w *world) moveStreams(keep ...string) {
	w.t.Helper()
	for _, h := range replicaHosts {
		if slices.Contains(keep, h) {
			continue
		}
		if _, err := w.lab.Balancer(context.Background(), "shutdown sessions server replicas/"+h); err != nil {
			w.t.Fatal(err)
		}
	}
}

// deviceID is the id control gave a laptop's device, looked up by its
// WireGuard public key in the replicas' database.
func (w *world) deviceID(laptop string) string {
	w.t.Helper()
	key := strings.TrimSpace(w.stdout(laptop, nil, "wg", "show", "wg1", "public-key"))
	ctx := context.Background()
	db, err := w.lab.Database(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	defer db.Close(ctx)
	var id string
	if err := db.QueryRow(ctx, "SELECT id FROM devices WHERE public_key = $1", key).Scan(&id); err != nil {
		w.t.Fatalf("device of %s (key %s): %v", laptop, key, err)
	}
	return id
}

// request is one line of HAProxy's request log.
type request struct {
	at      time.Time // accepted
	end     time.Time // answered
	srv     string    // the replica that answered
	status  int
	retries int
	method  string
	uri     string
}

var logLine = regexp.MustCompile(`^(\d+)\.(\d+) srv=(\S+) status=(-?\d+) ti=(-?\d+) tt=(-?\d+) rc=(-?\d+) (\S+) "([^"]*)"`)

func (w *world) balancerLog() []request {
	w.t.Helper()
	f, err := os.Open(w.lab.BalancerLog())
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	var out []request
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := logLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		ms, _ := strconv.ParseInt(m[2], 10, 64)
		status, _ := strconv.Atoi(m[4])
		ti, _ := strconv.Atoi(m[5])
		tt, _ := strconv.Atoi(m[6])
		rc, _ := strconv.Atoi(m[7])
		accepted := time.Unix(sec, ms*int64(time.Millisecond))
		out = append(out, request{at: accepted.Add(time.Duration(max(ti, 0)) * time.Millisecond),
			end: accepted.Add(time.Duration(tt) * time.Millisecond), srv: m[3], status: status,
			retries: rc, method: m[8], uri: m[9]})
	}
	return out
}

// heldAt is the laptop device's map request (long-poll or push stream)
// that was open at t: accepted before it, answered (or ended) after it. A
// stream still open is not in the balancer's log yet (moveStreams).
func (w *world) heldAt(device string, t time.Time) (request, bool) {
	for _, r := range w.balancerLog() {
		if r.method == "GET" && strings.Contains(r.uri, "/v1/devices/"+device+"/map") && !r.at.After(t) && !r.end.Before(t) {
			return r, true
		}
	}
	return request{}, false
}

// logged finds the first line of a replica's log holding all of the words
// and returns its time.
func (w *world) logged(host string, words ...string) (time.Time, bool) {
	b, _ := os.ReadFile(fmt.Sprintf("%s/logs/%s.control.log", w.env.Dir, host))
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, word := range words {
			ok = ok && strings.Contains(line, word)
		}
		if !ok {
			continue
		}
		if i := strings.Index(line, "time="); i >= 0 {
			f := strings.Fields(line[i+5:])
			if t, err := time.Parse(time.RFC3339Nano, f[0]); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// moveID runs the operator's move and returns the move's id as control
// logged it.
func (w *world) moveAll(target string, laptops []string) moveResult {
	w.t.Helper()
	m, out, err := w.move(target)
	if err != nil || m.State != "done" {
		w.t.Fatalf("move to %s: %+v %v\n%s", target, m, err, out)
	}
	for _, h := range laptops {
		w.waitStatus(h, 15*time.Second, "on "+target+" with peerUp", upOn(target, "ky3"))
	}
	return m
}

// TestReplicasPushAndFailover: two laptops whose map streams sit on replicas
// 2 and 3 follow a move committed on replica 1 (pushed across replicas,
// shown by which replica held each poll); then the replica holding the
// laptops' polls is killed with SIGKILL and a move still reaches them
// without their status going to error; then every replica but one is
// killed, one by one, with a move after each.
func TestReplicasPushAndFailover(t *testing.T) {
	w := replicasWorld(t, 2, 0)
	laptops := []string{w.env.Clients[0].Host, w.env.Clients[1].Host}

	// The laptops sign in and connect while control-1 takes no new
	// requests: their polls sit on control-2 and control-3.
	w.steer("control-2", "control-3")
	for _, h := range laptops {
		w.must(h, nil, "runos", "vpn", "up", "--cid", "ky3")
		w.waitStatus(h, 30*time.Second, "connected to ky3 on n1", upOn("n1", "ky3"))
	}
	devices := map[string]string{}
	for _, h := range laptops {
		devices[h] = w.deviceID(h)
	}
	// Now only control-1 takes new requests: the move, the target
	// gateway's report that switches it, are committed there.
	w.steer("control-1")
	w.moveAll("n2", laptops)
	switched, ok := w.logged("control-1", `msg="move switching"`, "to=n2")
	if !ok {
		t.Fatal("control-1 did not commit the switch")
	}
	w.moveStreams("control-1") // the streams held at the switch end, into the log
	for h, dev := range devices {
		var r request
		w.waitFor(10*time.Second, h+"'s stream in the balancer's log", func() bool {
			r, ok = w.heldAt(dev, switched)
			return ok
		})
		if !ok {
			t.Fatalf("%s: no map stream of device %s open at the switch (%s)", h, dev, switched.Format(time.RFC3339Nano))
		}
		if r.srv == "control-1" {
			t.Fatalf("%s's map stream was on control-1, where the switch was committed: not a push across replicas", h)
		}
		t.Logf("%s: switch committed on control-1 at %s; its map stream held by %s since %s, ended by the test %s later",
			h, switched.Format("15:04:05.000"), r.srv, r.at.Format("15:04:05.000"), r.end.Sub(switched))
	}

	// Every new request goes to control-2, the laptops' streams with them;
	// a move, then the others take requests again and control-2 is killed.
	w.steer("control-2")
	w.moveStreams("control-2")
	w.moveAll("n1", laptops)
	w.steer(replicaHosts...)
	errs := watchErrors(t, w, laptops)
	killed := time.Now()
	if err := w.lab.Stop("control-2", "control", syscall.SIGKILL, time.Second); err != nil {
		t.Fatal(err)
	}
	for h, dev := range devices {
		if r, ok := w.heldAt(dev, killed); ok && r.srv != "control-2" && r.retries == 0 {
			t.Logf("%s: the poll open at the kill was on %s", h, r.srv)
		}
	}
	w.moveAll("n2", laptops)
	for h, d := range errs() {
		if d > 5*time.Second {
			t.Errorf("%s: a cluster in error for %s after a replica died", h, d)
		}
	}
	// Kill the rest but one, a move after each.
	target := "n1"
	for _, h := range []string{"control-1"} {
		if err := w.lab.Stop(h, "control", syscall.SIGKILL, time.Second); err != nil {
			t.Fatal(err)
		}
		w.moveAll(target, laptops)
		target = map[string]string{"n1": "n2", "n2": "n1"}[target]
	}
	if _, ok := w.lab.Proc("control-3", "control"); !ok {
		t.Fatal("control-3 not running")
	}
}

// watchErrors follows the laptops' status streams and returns a function
// giving, per laptop, the longest time any of its clusters was in error.
func watchErrors(t *testing.T, w *world, laptops []string) func() map[string]time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	type span struct {
		since time.Time
		max   time.Duration
	}
	spans := map[string]*span{}
	done := make(chan struct{}, len(laptops))
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	for _, h := range laptops {
		spans[h] = &span{}
		go func() {
			defer func() { done <- struct{}{} }()
			_ = w.daemon(h).Watch(ctx, func(s *localapi.Status) bool {
				inError := false
				for _, c := range s.Clusters {
					inError = inError || c.State == localapi.ClusterError
				}
				<-mu
				sp := spans[h]
				now := time.Now()
				switch {
				case inError && sp.since.IsZero():
					sp.since = now
				case !inError && !sp.since.IsZero():
					sp.max = max(sp.max, now.Sub(sp.since))
					sp.since = time.Time{}
				}
				mu <- struct{}{}
				return true
			})
		}()
	}
	t.Cleanup(cancel)
	return func() map[string]time.Duration {
		cancel()
		for range laptops {
			<-done
		}
		out := map[string]time.Duration{}
		for h, sp := range spans {
			out[h] = sp.max
			if !sp.since.IsZero() {
				out[h] = max(sp.max, time.Since(sp.since))
			}
		}
		return out
	}
}

// leaseHolder is the replica holding the timers' lease: the database's
// advisory lock and the application_name of the connection holding it.
func (w *world) leaseHolder() string {
	w.t.Helper()
	ctx := context.Background()
	db, err := w.lab.Database(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	defer db.Close(ctx)
	var name string
	if err := db.QueryRow(ctx, `SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted`).Scan(&name); err != nil {
		w.t.Fatalf("the timers' lease holder: %v", err)
	}
	return name
}

// TestReplicasLeaseTakeoverOnSessionLapse: the replica holding the timers'
// lease is killed just before a session lapses; another takes the lease
// over and the session's device still leaves every gateway within a few
// seconds of the lapse.
func TestReplicasLeaseTakeoverOnSessionLapse(t *testing.T) {
	w := replicasWorld(t, 1, 40*time.Second)
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("n1", "ky3"))
	key := strings.TrimSpace(w.stdout(laptop, nil, "wg", "show", "wg1", "public-key"))
	if !strings.Contains(w.gatewayPeers("ky3-n1"), key) {
		t.Fatal("the laptop is not a peer of ky3-n1")
	}
	holder := w.leaseHolder()
	expires := st.Session.ExpiresAt
	t.Logf("session lapses at %s; %s holds the timers' lease", expires.Format("15:04:05.000"), holder)
	time.Sleep(time.Until(expires.Add(-2 * time.Second)))
	if err := w.lab.Stop(holder, "control", syscall.SIGKILL, time.Second); err != nil {
		t.Fatal(err)
	}
	w.waitFor(20*time.Second, "the lapsed session's device gone from ky3-n1", func() bool {
		return !strings.Contains(w.gatewayPeers("ky3-n1"), key)
	})
	gone := time.Now()
	t.Logf("peer gone from ky3-n1 %s after the lapse", gone.Sub(expires).Round(time.Millisecond))
	if d := gone.Sub(expires); d > 5*time.Second {
		t.Errorf("the lapsed session's device left ky3-n1 %s after the lapse, want within a few seconds", d)
	}
	next := w.leaseHolder()
	if next == holder {
		t.Fatalf("the lease is still %s's after it was killed", holder)
	}
	if _, ok := w.logged(next, "timers: this replica acts"); !ok {
		t.Errorf("%s took the lease without saying so", next)
	}
}

// TestReplicasDatabaseOutage: PostgreSQL stops for 10 s. API calls get a
// clear 503 "store unavailable", the tunnel keeps carrying traffic, and
// when the database is back everything resumes (a move reaches the
// laptop) with no replica restarted.
func TestReplicasDatabaseOutage(t *testing.T) {
	w := replicasWorld(t, 1, 0)
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("n1", "ky3"))
	c, _ := cluster(st, "ky3")
	page := "http://" + c.Server.Address + "/"
	pids := map[string]int{}
	for _, h := range replicaHosts {
		pids[h] = w.pidOf(h, "control")
	}
	op, err := w.lab.APIClient(laptop, w.env.OperatorToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	if err := w.lab.Stop("db", "postgres", syscall.SIGINT, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	_, err = op.Clusters(ctx)
	if err == nil || !strings.Contains(err.Error(), "store unavailable") {
		t.Fatalf("an API call with the database down: %v, want 503 store unavailable", err)
	}
	t.Logf("with the database down: %v", err)
	for time.Since(stopped) < 10*time.Second {
		if out, err := w.page(laptop, page); err != nil || !strings.Contains(out, "node=n1") {
			t.Fatalf("the tunnel stopped carrying traffic with the database down: %q %v", out, err)
		}
		time.Sleep(time.Second)
	}
	if err := w.lab.Restart(ctx, "db", "postgres"); err != nil {
		t.Fatal(err)
	}
	w.waitFor(30*time.Second, "every replica ready again", func() bool {
		for _, h := range replicaHosts {
			if _, err := w.lab.Get(ctx, h, fmt.Sprintf("https://%s/readyz", w.hostAddr(h))); err != nil {
				return false
			}
		}
		return true
	})
	if cs, err := op.Clusters(ctx); err != nil || len(cs) == 0 {
		t.Fatalf("after the database came back: %+v %v", cs, err)
	}
	w.moveAll("n2", []string{laptop})
	for h, pid := range pids {
		if got := w.pidOf(h, "control"); got != pid {
			t.Errorf("%s was restarted (%d → %d)", h, pid, got)
		}
	}
}

func (w *world) hostAddr(host string) string {
	h, ok := w.env.Host(host)
	if !ok {
		w.t.Fatalf("no host %s", host)
	}
	return h.Addresses[lab.WAN]
}

// replicaClient is an HTTP client from the laptop whose GETs go to one
// replica and POSTs to another, whatever host the URL names: a browser
// whose page a load balancer served from one replica and whose form it
// gave to another.
func (w *world) replicaClient(get, post string) *http.Client {
	w.t.Helper()
	hc, err := w.lab.HTTPClient(w.env.Client.Host)
	if err != nil {
		w.t.Fatal(err)
	}
	base := hc.Transport
	hc.Transport = roundTripFunc(func(orig *http.Request) (*http.Response, error) {
		r := orig.Clone(orig.Context())
		r.URL.Host = w.hostAddr(get)
		if r.Method == http.MethodPost {
			r.URL.Host = w.hostAddr(post)
		}
		resp, err := base.RoundTrip(r)
		if resp != nil {
			resp.Request = orig // the page is the public URL's, as a browser saw it
		}
		return resp, err
	})
	return hc
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// signInAcross signs the lab's user in with the device grant through three
// replicas: the code asked of one, the login form fetched from a second
// and posted to a third, the token polled at the first.
func (w *world) signInAcross(ctx context.Context, a, b, c string) (string, error) {
	codes := w.replicaClient(a, a)
	conf := oauth2.Config{ClientID: api.ClientCLI, Endpoint: oauth2.Endpoint{
		DeviceAuthURL: w.env.APIURL + api.PathDeviceCode, TokenURL: w.env.APIURL + api.PathToken}}
	cctx := context.WithValue(ctx, oauth2.HTTPClient, codes)
	da, err := conf.DeviceAuth(cctx)
	if err != nil {
		return "", fmt.Errorf("device code at %s: %w", a, err)
	}
	res, err := formlogin.Login(ctx, w.replicaClient(b, c), da.VerificationURIComplete, w.env.User, w.env.Password)
	if err != nil {
		return "", fmt.Errorf("login form from %s posted to %s: %w", b, c, err)
	}
	if !strings.Contains(res.Body, "Device signed in") {
		return "", fmt.Errorf("login form from %s posted to %s: %s", b, c, res.Body)
	}
	tok, err := conf.DeviceAccessToken(cctx, da)
	if err != nil {
		return "", fmt.Errorf("token at %s: %w", a, err)
	}
	return tok.AccessToken, nil
}

// TestReplicasFormsAndConcurrentJoins: a login form fetched from one
// replica and posted to another signs in; then 50 devices register and
// join ky3 at once through different replicas and get 50 distinct
// addresses.
func TestReplicasFormsAndConcurrentJoins(t *testing.T) {
	// One user registers them all: above control's default limit of 20.
	w := newWorldWith(t, lab.Options{Clients: 1, Store: lab.StorePostgres, ControlReplicas: 3,
		ControlFlags: []string{"--max-devices-per-user", "60"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const sessions, devices = 5, 50
	tokens := make([]string, sessions)
	errc := make(chan error, sessions)
	for i := range sessions {
		go func() {
			var err error
			tokens[i], err = w.signInAcross(ctx, replicaHosts[i%3], replicaHosts[(i+1)%3], replicaHosts[(i+2)%3])
			errc <- err
		}()
	}
	for range sessions {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	type joined struct {
		addr string
		err  error
	}
	got := make(chan joined, devices)
	start := make(chan struct{})
	for i := range devices {
		go func() {
			reg := &api.Client{BaseURL: "https://" + w.hostAddr(replicaHosts[i%3]), Token: tokens[i%sessions], HTTP: w.replicaClient(replicaHosts[i%3], replicaHosts[i%3])}
			join := &api.Client{BaseURL: "https://" + w.hostAddr(replicaHosts[(i+1)%3]), Token: tokens[i%sessions], HTTP: w.replicaClient(replicaHosts[(i+1)%3], replicaHosts[(i+1)%3])}
			k, err := wgtypes.GeneratePrivateKey()
			if err != nil {
				got <- joined{err: err}
				return
			}
			<-start
			d, err := reg.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: k.PublicKey().String(), Name: fmt.Sprintf("load-%02d", i), OS: "linux"})
			if err != nil {
				got <- joined{err: fmt.Errorf("register through %s: %w", replicaHosts[i%3], err)}
				return
			}
			if _, err := join.JoinCluster(ctx, d.ID, "ky3"); err != nil {
				got <- joined{err: fmt.Errorf("join through %s: %w", replicaHosts[(i+1)%3], err)}
				return
			}
			got <- joined{addr: d.Address}
		}()
	}
	close(start)
	seen := map[string]bool{}
	for range devices {
		j := <-got
		if j.err != nil {
			t.Fatal(j.err)
		}
		if seen[j.addr] {
			t.Fatalf("address %s given twice", j.addr)
		}
		seen[j.addr] = true
	}
	op, err := w.lab.APIClient(w.env.Client.Host, w.env.OperatorToken)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := op.VPNServices(ctx, "ky3")
	if err != nil || len(ss) != 1 || ss[0].Devices != devices {
		t.Fatalf("ky3's service after %d joins: %+v %v", devices, ss, err)
	}
	t.Logf("%d devices through 3 replicas: %d distinct addresses; ky3 has %d devices", devices, len(seen), ss[0].Devices)
}
