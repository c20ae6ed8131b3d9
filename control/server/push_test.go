package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/metrics"
	"github.com/runos/vpn/control/stream"
)

// watched is a Watch method run in the background: every document it
// gives, then how it ended.
type watched[T any] struct {
	docs   chan T
	ended  chan error
	cancel context.CancelFunc
}

func watchIt[T any](t *testing.T, w func(ctx context.Context, each func(T) error) error) *watched[T] {
	ctx, cancel := context.WithCancel(context.Background())
	wt := &watched[T]{docs: make(chan T, 100), ended: make(chan error, 1), cancel: cancel}
	go func() { wt.ended <- w(ctx, func(d T) error { wt.docs <- d; return nil }) }()
	t.Cleanup(cancel)
	return wt
}

func (wt *watched[T]) next(t *testing.T) T {
	t.Helper()
	select {
	case d := <-wt.docs:
		return d
	case err := <-wt.ended:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no document from the stream within 20 s")
	}
	panic("unreachable")
}

func (wt *watched[T]) end(t *testing.T) error {
	t.Helper()
	select {
	case d := <-wt.docs:
		t.Fatalf("a document %+v instead of the end", d)
	case err := <-wt.ended:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end within 20 s")
	}
	return nil
}

func (e *env) waitStreams(n int) {
	e.t.Helper()
	for i := 0; e.srv.Streams() != n; i++ {
		if i > 5000 {
			e.t.Fatalf("streams open: %d, want %d", e.srv.Streams(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func deviceMaps(t *testing.T, d *device, since uint64) *watched[*api.DeviceMap] {
	return watchIt(t, func(ctx context.Context, each func(*api.DeviceMap) error) error {
		return d.c.WatchDeviceMap(ctx, d.dev.ID, since, each)
	})
}

// A device's map stream gives the map, then every change once, a move's
// switch among them, and resumes after a drop from the last version seen.
func TestDeviceMapStream(t *testing.T) {
	mets := metrics.New(nil, time.Now)
	e := newEnv(t, func(c *Config) { c.Metrics = mets; c.Hub.ObserveFanOut(mets.FanOut) })
	ctx := context.Background()
	d := e.newDevice("ada@example.com", "laptop")
	k1 := newKey(t)
	e.serve("ky3", "n1", k1)
	e.heartbeat("ky3", "n2")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	w := deviceMaps(t, d, 0)
	m := w.next(t)
	if len(m.Clusters) != 1 || m.Clusters[0].VPN.PublicKey != k1.PublicKey().String() {
		t.Fatalf("first map %+v", m)
	}
	e.waitStreams(1)

	// Joining xym changes the map: one event, and the stream now follows
	// xym too (a move there reaches it).
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "xym"); err != nil {
		t.Fatal(err)
	}
	m2 := w.next(t)
	if len(m2.Clusters) != 2 || m2.Version <= m.Version {
		t.Fatalf("after the join: %+v", m2)
	}

	// A move of ky3: the switch reaches the stream.
	mv, err := e.op.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil {
		t.Fatal(err)
	}
	k2 := newKey(t)
	e.serve("ky3", "n2", k2) // the target's server up: the move switches
	var m3 *api.DeviceMap
	for m3 = w.next(t); m3.Clusters[0].VPN.PublicKey != k2.PublicKey().String(); m3 = w.next(t) {
		if m3.Version <= m2.Version {
			t.Fatalf("version %d after %d", m3.Version, m2.Version)
		}
	}
	if m3.Clusters[0].VPN.NodeID != "n2" {
		t.Fatalf("after the switch: %+v", m3.Clusters[0].VPN)
	}
	_ = mv

	// Dropped, a change meanwhile, resumed from the last version seen:
	// the change once, nothing repeated.
	w.cancel()
	if err := w.end(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled stream: %v", err)
	}
	if err := d.c.LeaveCluster(ctx, d.dev.ID, "xym"); err != nil {
		t.Fatal(err)
	}
	w = deviceMaps(t, d, m3.Version)
	m4 := w.next(t)
	if len(m4.Clusters) != 1 || m4.Version <= m3.Version {
		t.Fatalf("resumed: %+v", m4)
	}
	e.heartbeat("ky3", "n1")               // touches nothing of the device's
	e.clk.Advance(stream.DefaultHeartbeat) // the old stream is let go at its next visit
	e.waitStreams(1)
	select {
	case m := <-w.docs:
		t.Fatalf("a document repeated or unasked for: %+v", m)
	case <-time.After(100 * time.Millisecond):
	}

	// The metrics count the stream (one open now, one ended) and its
	// events in the fan-out.
	want := `
# HELP runos_control_streams_held Push streams open now, by kind (device_map, gateway_map, move, service).
# TYPE runos_control_streams_held gauge
runos_control_streams_held{kind="device_map"} 1
`
	if err := testutil.GatherAndCompare(mets.Registry(), strings.NewReader(want), "runos_control_streams_held"); err != nil {
		t.Error(err)
	}
	mfs, err := mets.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "runos_control_fanout_seconds" && mf.Metric[0].GetHistogram().GetSampleCount() == 0 {
			t.Error("no fan-out observed although the stream wrote changes")
		}
	}
}

// newH2Server serves e's API over TLS with HTTP/2 offered.
func newH2Server(t *testing.T, e *env) *httptest.Server {
	ts := httptest.NewUnstartedServer(e.srv.Handler())
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// Every wake checks the caller again: a stream ends with the refusal as
// its last event within a second of a sign-out, an expiry, a revoke, or
// (no topic tells of it) an operator token's revocation.
func TestStreamsStopWhenTheCallerEnds(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MoveReadyTimeout = 48 * time.Hour })
	ctx := context.Background()
	e.serve("ky3", "n1", newKey(t))
	within := func(what string, start time.Time) {
		t.Helper()
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: ended after %s, want within a second", what, took)
		}
	}

	// Signed out.
	d := e.newDevice("ada@example.com", "a")
	w := deviceMaps(t, d, 0)
	w.next(t)
	e.waitStreams(1)
	start := time.Now()
	if err := d.c.EndSession(ctx); err != nil {
		t.Fatal(err)
	}
	wantCode(t, w.end(t), 401, api.CodeUnauthorized)
	within("sign-out", start)

	// Lapsed.
	d = e.newDevice("ada@example.com", "b")
	w = deviceMaps(t, d, 0)
	w.next(t)
	e.waitStreams(1)
	e.clk.Advance(24 * time.Hour)
	wantCode(t, w.end(t), 401, api.CodeSessionExpired)

	// Revoked by an operator.
	d = e.newDevice("ada@example.com", "c")
	w = deviceMaps(t, d, 0)
	w.next(t)
	e.waitStreams(1)
	start = time.Now()
	if _, err := e.op.RevokeDevice(ctx, d.dev.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, w.end(t), 401, api.CodeDeviceRevoked)
	within("revoke", start)

	// An operator's --follow of a service and a move: its token revoked.
	ada := e.signIn("ada@example.com")
	e.heartbeat("ky3", "n2")
	mv, err := ada.StartMove(ctx, "ky3", "wg-ky3", "n2")
	if err != nil {
		t.Fatal(err)
	}
	svc := watchIt(t, func(ctx context.Context, each func(*api.VPNService) error) error {
		return e.op.WatchVPNService(ctx, "ky3", "wg-ky3", 0, each)
	})
	move := watchIt(t, func(ctx context.Context, each func(*api.Move) error) error {
		return e.op.WatchMove(ctx, mv.ID, mv.Version, each)
	})
	svc.next(t)
	e.waitStreams(2)
	if _, err := ada.RevokeToken(ctx, "", "world-file"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Second) // the wheel's tick checks them again
	wantCode(t, svc.end(t), 401, api.CodeTokenRevoked)
	wantCode(t, move.end(t), 401, api.CodeTokenRevoked)
	e.waitStreams(0)
	if e.hub.Subscribed() != 0 {
		t.Fatalf("subscriptions left: %d", e.hub.Subscribed())
	}
}

// A gateway's map stream: its peers change as devices join and leave.
func TestGatewayMapStream(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.serve("ky3", "n1", newKey(t))
	gw := e.gateway("ky3", "n1")
	w := watchIt(t, func(ctx context.Context, each func(*api.GatewayMap) error) error {
		return gw.WatchGatewayMap(ctx, 0, each)
	})
	m := w.next(t)
	if m.Serve == nil || m.Serve.Role != api.GatewayActive || len(m.Serve.Peers) != 0 {
		t.Fatalf("first map %+v", m)
	}
	d := e.newDevice("bob@example.com", "b")
	if _, err := d.c.JoinCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	if m = w.next(t); len(m.Serve.Peers) != 1 || m.Serve.Peers[0].PublicKey != d.key.PublicKey().String() {
		t.Fatalf("after the join: %+v", m.Serve)
	}
	if err := d.c.LeaveCluster(ctx, d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	if m = w.next(t); len(m.Serve.Peers) != 0 {
		t.Fatalf("after the leave: %+v", m.Serve)
	}
}

// A control that answers streams as long-polls (NoStreams, or one older
// than streams) gives the document, and the client is told to long-poll.
func TestStreamRequestToAControlWithoutStreams(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.NoStreams = true })
	d := e.newDevice("ada@example.com", "a")
	var got []*api.DeviceMap
	err := d.c.WatchDeviceMap(context.Background(), d.dev.ID, 0, func(m *api.DeviceMap) error { got = append(got, m); return nil })
	if !errors.Is(err, api.ErrNoStream) || len(got) != 1 || got[0].Device.ID != d.dev.ID {
		t.Fatalf("err %v, maps %+v", err, got)
	}
	if e.srv.Streams() != 0 {
		t.Fatal("a stream was opened")
	}
}

// Over HTTP/2 (the handler waits in its goroutine) a stream works alike.
func TestDeviceMapStreamOverHTTP2(t *testing.T) {
	e := newEnv(t)
	ts := newH2Server(t, e)
	d := e.newDevice("ada@example.com", "a")
	c := &api.Client{BaseURL: ts.URL, Token: d.c.Token, HTTP: ts.Client()}
	w := watchIt(t, func(ctx context.Context, each func(*api.DeviceMap) error) error {
		return c.WatchDeviceMap(ctx, d.dev.ID, 0, func(m *api.DeviceMap) error { return each(m) })
	})
	m := w.next(t)
	e.waitStreams(1)
	e.serve("ky3", "n1", newKey(t))
	if _, err := d.c.JoinCluster(context.Background(), d.dev.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	if m2 := w.next(t); len(m2.Clusters) != 1 || m2.Version <= m.Version {
		t.Fatalf("after the join: %+v", m2)
	}
	if err := d.c.EndSession(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantCode(t, w.end(t), 401, api.CodeUnauthorized)
}

// The stream's answer names its heartbeat, and a client that asks for a
// document that does not exist is answered as a long-poll would be.
func TestStreamAnswerHeads(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.StreamHeartbeat = 7 * time.Second })
	d := e.newDevice("ada@example.com", "a")
	req, _ := http.NewRequest("GET", e.ts.URL+"/v1/devices/"+d.dev.ID+"/map?stream=1", nil)
	req.Header.Set("Authorization", "Bearer "+d.c.Token)
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != api.StreamContentType || resp.Header.Get(api.HeaderHeartbeat) != "7" || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("head: %s %v", resp.Status, resp.Header)
	}
	status, code := e.raw(d.c.Token, "GET", "/v1/devices/dev-nope/map?stream=1", "")
	if status != 404 || code != api.CodeNotFound {
		t.Fatalf("unknown device: %d %s", status, code)
	}
	if !strings.HasPrefix(resp.Proto, "HTTP/1") {
		t.Fatalf("proto %s", resp.Proto)
	}
}
