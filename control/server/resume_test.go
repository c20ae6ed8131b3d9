package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/resume"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/token"
)

// countingStore counts the sign-in reads (a session by its token's hash),
// the read transactions made through it and, in them, the reads of users
// and groups (users_test.go).
type countingStore struct {
	store.Store
	views, signIns, userReads atomic.Int64
	deviceReads               atomic.Int64
	mu                        sync.Mutex
	signInsOf                 map[string]int // by token hash
}

// signInsOfToken is how many times the sign-in of tok was read.
func (c *countingStore) signInsOfToken(tok string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signInsOf[token.Hash(tok)]
}

func (c *countingStore) View(ctx context.Context, fn func(store.Reader) error) error {
	c.views.Add(1)
	return c.Store.View(ctx, func(r store.Reader) error { return fn(countingReader{r, c}) })
}

type countingReader struct {
	store.Reader
	c *countingStore
}

func (r countingReader) Device(id string) (model.Device, error) {
	r.c.deviceReads.Add(1)
	return r.Reader.Device(id)
}

func (r countingReader) SessionByToken(hash string) (model.Session, error) {
	r.c.signIns.Add(1)
	r.c.mu.Lock()
	if r.c.signInsOf == nil {
		r.c.signInsOf = map[string]int{}
	}
	r.c.signInsOf[hash]++
	r.c.mu.Unlock()
	return r.Reader.SessionByToken(hash)
}

// resumeEnv is a control whose store counts, with one signed-in device.
func resumeEnv(t *testing.T) (*env, *countingStore, string, *device) {
	var cs *countingStore
	e := newEnv(t, func(c *Config) {
		cs = &countingStore{Store: c.Store}
		c.Store = cs
	})
	tok, _, err := e.srv.CreateSession(context.Background(), "bob@example.com", api.ClientCLI, "")
	if err != nil {
		t.Fatal(err)
	}
	d := &device{c: e.client(tok)}
	d.dev, err = d.c.RegisterDevice(context.Background(), api.RegisterDeviceRequest{PublicKey: newKey(t).PublicKey().String(), Name: "bob-laptop", OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	return e, cs, tok, d
}

// openStream opens the device's map stream with bearer tok and resume
// token rt ("": none), and returns the answer (its body is closed at the
// test's end).
func (e *env) openStream(t *testing.T, tok, id, rt string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.ts.URL+"/v1/devices/"+id+"/map?stream=1&since=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if rt != "" {
		req.Header.Set(api.HeaderResume, rt)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// firstEvent reads the stream's first event.
func firstEvent(t *testing.T, resp *http.Response) api.Event {
	t.Helper()
	ev, err := api.NewEventReader(resp.Body, 0).Next()
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// forget is what a replica that never served the device knows of it:
// nothing cached. It empties the caches in place: streams of earlier steps
// may still be reading them.
func (e *env) forget() {
	e.srv.auth.c.Purge()
	e.srv.devCache.c.Purge()
}

func TestResumeServedWithoutSignInRead(t *testing.T) {
	e, cs, tok, d := resumeEnv(t)
	resp := e.openStream(t, tok, d.dev.ID, "")
	rt := resp.Header.Get(api.HeaderResume)
	if resp.StatusCode != 200 || rt == "" {
		t.Fatalf("first stream: %d, resume token %q", resp.StatusCode, rt)
	}
	firstEvent(t, resp)
	resp.Body.Close()

	e.forget()
	views, signIns := cs.views.Load(), cs.signIns.Load()
	resp = e.openStream(t, tok, d.dev.ID, rt)
	if ev := firstEvent(t, resp); resp.StatusCode != 200 || ev.Name != api.EventDeviceMap {
		t.Fatalf("resumed stream: %d, first event %q", resp.StatusCode, ev.Name)
	}
	if n := cs.signIns.Load() - signIns; n != 0 {
		t.Fatalf("a resumed stream read the sign-in %d time(s)", n)
	}
	// The device itself is read (its own revocation is checked there).
	if n := cs.views.Load() - views; n != 1 {
		t.Fatalf("a resumed stream took %d reads, want 1 (the device)", n)
	}
	if resp.Header.Get(api.HeaderResume) == "" {
		t.Fatal("a resumed stream carries no resume token for the next move")
	}

	// Without its token the same reconnect reads the sign-in.
	e.forget()
	signIns = cs.signIns.Load()
	resp = e.openStream(t, tok, d.dev.ID, "")
	firstEvent(t, resp)
	if n := cs.signIns.Load() - signIns; n != 1 {
		t.Fatalf("a stream without a resume token read the sign-in %d time(s), want 1", n)
	}
}

// refusedFallsBack opens the stream with rt after forgetting everything,
// and checks that the sign-in was read in full (the token was refused)
// and that the answer has the status want.
func refusedFallsBack(t *testing.T, e *env, cs *countingStore, tok, id, rt string, want int) *http.Response {
	t.Helper()
	e.forget()
	before := cs.signIns.Load()
	resp := e.openStream(t, tok, id, rt)
	if resp.StatusCode != want {
		t.Fatalf("status %d, want %d", resp.StatusCode, want)
	}
	// At least one: streams of earlier steps, still open, may check their
	// sign-in again meanwhile (an ended session wakes them).
	if n := cs.signIns.Load() - before; n < 1 {
		t.Fatalf("the refused token was not followed by the full check: %d sign-in read(s)", n)
	}
	return resp
}

func TestResumeRefusedFallsBack(t *testing.T) {
	e, cs, tok, d := resumeEnv(t)
	resp := e.openStream(t, tok, d.dev.ID, "")
	rt := resp.Header.Get(api.HeaderResume)
	resp.Body.Close()
	c, err := e.srv.resumes.Check(rt, e.clk.Now())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("forged", func(t *testing.T) {
		forger, _ := resume.New([]byte("not the secret of this control!!"))
		refusedFallsBack(t, e, cs, tok, d.dev.ID, forger.Issue(c), 200)
		// One character of the payload changed: its signature no longer fits.
		b := []byte(rt)
		b[8] = map[bool]byte{true: 'A', false: 'B'}[b[8] != 'A']
		tampered := string(b)
		refusedFallsBack(t, e, cs, tok, d.dev.ID, tampered, 200)
	})
	t.Run("expired", func(t *testing.T) {
		old := c
		old.Expires = e.clk.Now().Add(time.Minute)
		short := e.srv.resumes.Issue(old)
		e.clk.Advance(2 * time.Minute)
		refusedFallsBack(t, e, cs, tok, d.dev.ID, short, 200)
	})
	t.Run("another device or sign-in", func(t *testing.T) {
		other := c
		other.Device = "dev-not-this-one"
		refusedFallsBack(t, e, cs, tok, d.dev.ID, e.srv.resumes.Issue(other), 200)
		other = c
		other.Hash = "another sign-in's hash"
		refusedFallsBack(t, e, cs, tok, d.dev.ID, e.srv.resumes.Issue(other), 200)
	})
	t.Run("ended session", func(t *testing.T) {
		if err := d.c.EndSession(context.Background()); err != nil {
			t.Fatal(err)
		}
		resp := refusedFallsBack(t, e, cs, tok, d.dev.ID, rt, 401)
		if resp.Header.Get(api.HeaderResume) != "" {
			t.Fatal("a refusal carries a resume token")
		}
	})
}

// TestResumedStreamEndsOnRevoke: a stream resumed from its token still
// ends when the device is revoked (revocation wins over the token).
func TestResumedStreamEndsOnRevoke(t *testing.T) {
	e, _, tok, d := resumeEnv(t)
	resp := e.openStream(t, tok, d.dev.ID, "")
	rt := resp.Header.Get(api.HeaderResume)
	resp.Body.Close()
	e.forget()
	resp = e.openStream(t, tok, d.dev.ID, rt)
	er := api.NewEventReader(resp.Body, 0)
	if ev, err := er.Next(); err != nil || ev.Name != api.EventDeviceMap {
		t.Fatalf("resumed stream: %v, %q", err, ev.Name)
	}
	if _, err := e.op.RevokeDevice(context.Background(), d.dev.ID); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := er.Next()
		if err != nil {
			t.Fatalf("the stream ended without saying the device was revoked: %v", err)
		}
		if ev.Name == api.EventError {
			if !strings.Contains(string(ev.Data), api.CodeDeviceRevoked) {
				t.Fatalf("ended with %s", ev.Data)
			}
			break
		}
	}
	// And its token no longer resumes: the session moved.
	e.forget()
	if resp := e.openStream(t, tok, d.dev.ID, rt); resp.StatusCode != 401 {
		t.Fatalf("after the revocation the token resumed: %d", resp.StatusCode)
	}
}

func TestPacer(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := pacer{every: time.Millisecond, burst: 3, maxWait: 3 * time.Millisecond, rand: func(n int64) int64 { return n - 1 }}
	for i := range 3 {
		if d, ok := p.delay(now); d != 0 || !ok {
			t.Fatalf("turn %d of the burst waits %v (%v)", i, d, ok)
		}
	}
	// Past the burst: one a millisecond, each with up to one more of jitter.
	for i := 1; i <= 3; i++ {
		want := time.Duration(i)*time.Millisecond + time.Millisecond - 1
		if d, ok := p.delay(now); d != want || !ok {
			t.Fatalf("turn %d past the burst waits %v (%v), want %v", i, d, ok, want)
		}
	}
	// The next turn is 4 ms off, past maxWait: not given, and not taken
	// (callers that leave cannot push the queue out without end).
	for range 5 {
		if _, ok := p.delay(now); ok {
			t.Fatal("a turn past maxWait was given")
		}
	}
	if d, ok := p.delay(now.Add(time.Millisecond)); !ok || d != 3*time.Millisecond+time.Millisecond-1 {
		t.Fatalf("a millisecond later: waits %v (%v), want the turn refused before", d, ok)
	}
	// Idle long enough, the burst is there again.
	if d, ok := p.delay(now.Add(time.Second)); d != 0 || !ok {
		t.Fatalf("after a second idle: waits %v (%v)", d, ok)
	}
}

// A stream resumed from a token gets a token that lapses no later than
// the one it came with: resuming again and again never stands in for the
// full check beyond resumeMaxAge after it.
func TestResumedTokenLapsesNoLater(t *testing.T) {
	e, _, tok, d := resumeEnv(t)
	rt := e.openStream(t, tok, d.dev.ID, "").Header.Get(api.HeaderResume)
	first, err := e.srv.resumes.Check(rt, e.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Hour)
	next := e.openStream(t, tok, d.dev.ID, rt).Header.Get(api.HeaderResume)
	c, err := e.srv.resumes.Check(next, e.clk.Now())
	if err != nil {
		t.Fatalf("the resumed stream's token: %v", err)
	}
	if c.Expires.After(first.Expires) {
		t.Fatalf("a resumed stream's token lapses at %v, after the one it came with (%v)", c.Expires, first.Expires)
	}
}

// A woken stream reads only what changed: a move made by someone else (an
// operator) wakes it to read the cluster's new config, but neither its
// caller's sign-in nor its device, which it keeps between reads while they
// stand, even with nothing cached (as after a replica's caches went cold);
// a change to either (a sign-out here) is still seen at once.
func TestWokenStreamReadsOnlyWhatChanged(t *testing.T) {
	e, cs, tok, d := resumeEnv(t)
	ctx := context.Background()
	e.serve("ky3", "n1", newKey(t))
	e.heartbeat("ky3", "n2")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	w := deviceMaps(t, d, 0)
	m := w.next(t)
	e.waitStreams(1)

	e.forget()
	before, devices := cs.signInsOfToken(tok), cs.deviceReads.Load()
	if _, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2"); err != nil {
		t.Fatal(err)
	}
	k2 := newKey(t)
	e.serve("ky3", "n2", k2) // the target's server up: the move switches
	for m.Clusters[0].VPN.PublicKey != k2.PublicKey().String() {
		m = w.next(t)
	}
	if n := cs.signInsOfToken(tok) - before; n != 0 {
		t.Errorf("the woken stream read its sign-in %d time(s), want 0", n)
	}
	if n := cs.deviceReads.Load() - devices; n != 0 {
		t.Errorf("the woken stream read its device %d time(s), want 0", n)
	}

	if err := d.c.EndSession(ctx); err != nil {
		t.Fatal(err)
	}
	wantCode(t, w.end(t), 401, api.CodeUnauthorized)
}
