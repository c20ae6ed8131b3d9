package stream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/internal/connlimit"
)

// fakeSource is a document whose version the test sets; Load counts its calls.
type fakeSource struct {
	mu      sync.Mutex
	version uint64
	pad     int // bytes of padding in the document
	err     error
	topics  []*hub.Topic
	finalAt uint64 // from this version on (0: never) the document is final
}

func (f *fakeSource) Load(context.Context) (Doc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Doc{}, f.err
	}
	v, pad := f.version, f.pad
	final := f.finalAt != 0 && v >= f.finalAt
	return Doc{Version: v, Known: v, Topics: f.topics, Final: final, Append: func(b []byte) []byte {
		b = fmt.Appendf(b, `{"version":%d`, v)
		if pad > 0 {
			b = append(b, `,"pad":"`...)
			b = append(b, bytes.Repeat([]byte{'x'}, pad)...)
			b = append(b, '"')
		}
		return append(b, '}')
	}}, nil
}

func (f *fakeSource) set(v uint64) {
	f.mu.Lock()
	f.version = v
	f.mu.Unlock()
}

// rig is control's side: a hub, Streams on a fake clock, and a server
// whose one route streams src from ?since=.
type rig struct {
	h       *hub.Hub
	clk     *clock.Fake
	ss      *Streams
	src     *fakeSource
	ts      *httptest.Server
	topic   *hub.Topic
	dropped chan string
	recheck bool
}

func newRig(t *testing.T, h2 bool, mutate ...func(*Config)) *rig {
	t.Helper()
	return newRigOn(t, rigServer{h2: h2, tls: h2}, mutate...)
}

// rigServer is how the rig's server listens: HTTP/2 (over TLS), or
// HTTP/1.1 over TLS or not, its listener wrapped as control wraps its own.
type rigServer struct {
	h2, tls bool
	wrap    func(net.Listener) net.Listener
}

func newRigOn(t *testing.T, o rigServer, mutate ...func(*Config)) *rig {
	t.Helper()
	h2 := o.h2
	h := hub.New(1, map[string]uint64{hub.Device("d1"): 1})
	rg := &rig{h: h, clk: clock.NewFake(time.Unix(1_800_000_000, 0)), topic: h.Topic(hub.Device("d1")), dropped: make(chan string, 16)}
	rg.src = &fakeSource{version: 1, topics: []*hub.Topic{rg.topic}}
	cfg := Config{Hub: h, Clock: rg.clk, Heartbeat: 3 * time.Second}
	for _, m := range mutate {
		m(&cfg)
	}
	rg.ss = New(cfg)
	rg.ts = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
		d, err := rg.src.Load(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		rg.ss.Serve(w, r, d, rg.src, Options{Event: api.EventDeviceMap, Since: since, Recheck: rg.recheck,
			Dropped: func(reason string) { rg.dropped <- reason }})
	}))
	if o.wrap != nil {
		rg.ts.Listener = o.wrap(rg.ts.Listener)
	}
	if o.tls {
		rg.ts.EnableHTTP2 = h2
		rg.ts.StartTLS()
	} else {
		rg.ts.Start()
	}
	t.Cleanup(func() {
		rg.ss.Close()
		rg.ts.CloseClientConnections()
		rg.ts.Close()
	})
	return rg
}

// change makes version v of the document and publishes it.
func (rg *rig) change(v uint64) {
	rg.src.set(v)
	rg.h.Publish(v, []string{rg.topic.Name()})
}

// client is one stream as a client reads it: every frame, heartbeats too.
type client struct {
	t      *testing.T
	resp   *http.Response
	conn   net.Conn // the stream's connection, to close it at once
	frames chan frame
}

type frame struct {
	heartbeat bool
	ev        api.Event
	err       error
}

func (rg *rig) open(t *testing.T, since uint64) *client {
	t.Helper()
	// A transport of its own, keeping the connection it dials: closing
	// a response's body closes the connection later, in the transport's
	// own goroutine, and a test of what control does when the client
	// leaves must know it has left.
	tr := rg.ts.Client().Transport.(*http.Transport).Clone()
	conns := make(chan net.Conn, 1)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			conns <- c
		}
		return c, err
	}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Get(fmt.Sprintf("%s/map?since=%d&stream=1", rg.ts.URL, since))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != api.StreamContentType || resp.Header.Get(api.HeaderHeartbeat) != "3" {
		t.Fatalf("answer %s %v", resp.Status, resp.Header)
	}
	c := &client{t: t, resp: resp, conn: <-conns, frames: make(chan frame, 100)}
	go c.read()
	t.Cleanup(func() { resp.Body.Close() })
	return c
}

// read splits the body into frames (a blank line ends each), keeping the
// heartbeats the event reader would skip.
func (c *client) read() {
	br := bufio.NewReader(c.resp.Body)
	var cur bytes.Buffer
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			c.frames <- frame{err: err}
			return
		}
		cur.Write(line)
		if len(line) > 1 {
			continue
		}
		raw := cur.Bytes()
		cur.Reset()
		if bytes.Equal(raw, api.Heartbeat) {
			c.frames <- frame{heartbeat: true}
			continue
		}
		ev, err := api.NewEventReader(bytes.NewReader(raw), 0).Next()
		c.frames <- frame{ev: ev, err: err}
	}
}

func (c *client) next() frame {
	c.t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-time.After(10 * time.Second):
		c.t.Fatal("no frame within 10 s")
	}
	return frame{}
}

// event is the next frame, which must be a document of version v.
func (c *client) event(v uint64) {
	c.t.Helper()
	f := c.next()
	if f.err != nil || f.heartbeat || f.ev.Name != api.EventDeviceMap || f.ev.ID != v {
		c.t.Fatalf("frame %+v, want the document of version %d", f, v)
	}
	var doc struct{ Version uint64 }
	if err := json.Unmarshal(f.ev.Data, &doc); err != nil || doc.Version != v {
		c.t.Fatalf("data %q, want version %d", f.ev.Data, v)
	}
}

// nothing checks that no frame is waiting.
func (c *client) nothing() {
	c.t.Helper()
	select {
	case f := <-c.frames:
		c.t.Fatalf("unexpected frame %+v", f)
	default:
	}
}

// settle waits until every wake so far was dealt with: the stream's
// writer has finished (no frame can still be on its way).
func (rg *rig) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := false
		rg.ss.mu.Lock()
		for st := range rg.ss.open {
			busy = busy || st.running.Load() || st.flags.Load() != 0 || len(st.kick) > 0
		}
		rg.ss.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			rg.ss.mu.Lock()
			for st := range rg.ss.open {
				t.Logf("stream: running %v flags %b closed %v", st.running.Load(), st.flags.Load(), st.closed)
			}
			rg.ss.mu.Unlock()
			buf := make([]byte, 1<<20)
			t.Logf("%s", buf[:runtime.Stack(buf, true)])
			t.Fatal("streams still busy after 10 s")
		}
		runtime.Gosched()
	}
}

// onWheel waits until n streams are on the wheel (Serve puts them there
// just after it wrote their first frame).
func (rg *rig) onWheel(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		wh := &rg.ss.wheel
		wh.mu.Lock()
		on := 0
		for _, s := range wh.slots {
			on += len(s)
		}
		wh.mu.Unlock()
		if on == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d streams on the wheel after 10 s, want %d", on, n)
		}
		runtime.Gosched()
	}
}

func TestStreamFraming(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			rg := newRig(t, h2)
			c := rg.open(t, 0)
			c.event(1) // since 0: the document at once
			if (c.resp.ProtoMajor == 2) != h2 {
				t.Fatalf("protocol %s", c.resp.Proto)
			}
			rg.change(2)
			c.event(2)
			// A wake that brings no newer version writes nothing.
			rg.h.Publish(3, []string{rg.topic.Name()})
			rg.settle(t)
			c.nothing()
			rg.change(5)
			c.event(5)
			if rg.ss.Len() != 1 || rg.h.Subscribed() != 1 {
				t.Fatalf("open %d, subscribed %d", rg.ss.Len(), rg.h.Subscribed())
			}
		})
	}
}

func TestStreamResumesFromTheLastVersionSeen(t *testing.T) {
	rg := newRig(t, false)
	c := rg.open(t, 0)
	c.event(1)
	rg.change(2)
	c.event(2)
	c.resp.Body.Close() // the connection drops
	rg.ts.CloseClientConnections()
	rg.change(3) // a change while the client is away
	rg.settle(t)

	c = rg.open(t, 2) // resumes from the last version it saw
	c.event(3)        // the change it missed, once
	rg.h.Publish(4, []string{rg.topic.Name()})
	rg.settle(t)
	c.nothing() // not repeated by a later wake
	rg.change(6)
	c.event(6)

	// A client that is up to date gets nothing until the next change.
	c2 := rg.open(t, 6)
	rg.settle(t)
	c2.nothing()
	rg.change(7)
	c.event(7)
	c2.event(7)
}

func TestStreamReadsAgainWhenAChangeSlipsInBeforeItsSub(t *testing.T) {
	rg := newRig(t, false)
	// The handler read version 1, then version 2 was published before the
	// stream subscribed: the hub's topic is ahead of what was read.
	rg.src.set(2)
	rg.h.Publish(2, []string{rg.topic.Name()})
	first := Doc{Version: 1, Known: 1, Topics: []*hub.Topic{rg.topic}, Append: func(b []byte) []byte { return append(b, `{"version":1}`...) }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rg.ss.Serve(w, r, first, rg.src, Options{Event: api.EventDeviceMap})
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	er := api.NewEventReader(resp.Body, 0)
	for _, want := range []uint64{1, 2} {
		ev, err := er.Next()
		if err != nil || ev.ID != want {
			t.Fatalf("event %+v, %v; want version %d", ev, err, want)
		}
	}
}

func TestStreamHeartbeats(t *testing.T) {
	rg := newRig(t, false)
	c := rg.open(t, 0)
	c.event(1)
	rg.onWheel(t, 1)
	rg.clk.Advance(2 * time.Second)
	rg.settle(t)
	c.nothing() // quiet for less than a period
	rg.clk.Advance(time.Second)
	if f := c.next(); !f.heartbeat {
		t.Fatalf("frame %+v, want a heartbeat after 3 quiet seconds", f)
	}
	rg.clk.Advance(3 * time.Second)
	if f := c.next(); !f.heartbeat {
		t.Fatalf("frame %+v, want the next heartbeat a period later", f)
	}
	// A stream that wrote a change just before its turn is not due then,
	// but at the turn after (its silence is at most two periods).
	rg.clk.Advance(2 * time.Second)
	rg.change(2)
	c.event(2)
	rg.clk.Advance(time.Second)
	rg.settle(t)
	c.nothing()
	rg.clk.Advance(2 * time.Second)
	rg.settle(t)
	c.nothing()
	rg.clk.Advance(time.Second) // its next turn: quiet for 4 s
	if f := c.next(); !f.heartbeat {
		t.Fatalf("frame %+v, want a heartbeat at the turn after the change", f)
	}
}

func TestStreamEndsWithTheErrorOfItsSource(t *testing.T) {
	for _, recheck := range []bool{false, true} {
		t.Run(fmt.Sprintf("recheck=%v", recheck), func(t *testing.T) {
			rg := newRig(t, false)
			rg.recheck = recheck
			c := rg.open(t, 0)
			c.event(1)
			rg.src.mu.Lock()
			rg.src.err = &api.Error{Status: 401, Code: api.CodeSessionExpired, Message: "your sign-in expired"}
			rg.src.mu.Unlock()
			if recheck {
				// No topic tells of the end of an operator token: the next
				// tick checks it.
				rg.onWheel(t, 1)
				rg.clk.Advance(time.Second)
			} else {
				rg.h.Publish(2, []string{rg.topic.Name()}) // the session's topic
			}
			f := c.next()
			var se api.StreamError
			if f.err != nil || f.ev.Name != api.EventError || json.Unmarshal(f.ev.Data, &se) != nil || se.Status != 401 || se.Error.Code != api.CodeSessionExpired {
				t.Fatalf("frame %+v (%s), want the 401 session_expired error event", f, f.ev.Data)
			}
			if f := c.next(); !errors.Is(f.err, io.EOF) {
				t.Fatalf("after the error: %+v, want the end of the answer", f)
			}
			rg.settle(t)
			if rg.ss.Len() != 0 || rg.h.Subscribed() != 0 {
				t.Fatalf("open %d, subscribed %d after the end", rg.ss.Len(), rg.h.Subscribed())
			}
		})
	}
}

func TestSlowReaderIsDroppedAtTheBound(t *testing.T) {
	rg := newRig(t, false, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond; c.SendBuffer = 4096 })
	rg.src.pad = 64 << 10
	// A client that reads the head and then nothing more, with a small
	// receive buffer.
	conn, err := net.Dial("tcp", rg.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /map?since=1&stream=1 HTTP/1.1\r\nHost: control\r\n\r\n")
	head, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(head, "200") {
		t.Fatalf("head %q, %v", head, err)
	}
	for v := uint64(2); ; v++ {
		rg.change(v)
		select {
		case reason := <-rg.dropped:
			if reason != "slow" {
				t.Fatalf("dropped as %q, want slow", reason)
			}
			rg.settle(t)
			if rg.ss.Len() != 0 || rg.h.Subscribed() != 0 {
				t.Fatalf("open %d, subscribed %d after the drop", rg.ss.Len(), rg.h.Subscribed())
			}
			t.Logf("dropped after %d documents of 64 KiB", v-1)
			return
		case <-time.After(50 * time.Millisecond):
		}
		if v > 1000 {
			t.Fatal("a client that does not read was never dropped")
		}
	}
}

// A reader that keeps up is never dropped, whatever the sizes.
func TestReaderThatKeepsUpIsNotDropped(t *testing.T) {
	rg := newRig(t, false, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond; c.SendBuffer = 4096 })
	rg.src.pad = 64 << 10
	c := rg.open(t, 0)
	c.event(1)
	for v := uint64(2); v < 30; v++ {
		rg.change(v)
		c.event(v)
	}
	select {
	case r := <-rg.dropped:
		t.Fatalf("dropped (%s)", r)
	default:
	}
}

func TestClosedStreamsEndAndTheirClientsSeeTheEnd(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			rg := newRig(t, h2)
			c := rg.open(t, 0)
			c.event(1)
			rg.onWheel(t, 1)
			rg.ss.Close()
			if f := c.next(); !errors.Is(f.err, io.EOF) {
				t.Fatalf("frame %+v, want the end", f)
			}
			if rg.ss.Len() != 0 || rg.h.Subscribed() != 0 {
				t.Fatalf("open %d, subscribed %d", rg.ss.Len(), rg.h.Subscribed())
			}
		})
	}
}

// A final document (a finished move) is the stream's last event: control
// ends the answer after it and holds nothing for a client about to leave,
// whether the document turns final while the stream is open or is final
// when the stream opens.
func TestStreamEndsAfterAFinalDocument(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			rg := newRig(t, h2)
			rg.src.finalAt = 3
			c := rg.open(t, 0)
			c.event(1)
			rg.change(2)
			c.event(2)
			rg.change(3)
			c.event(3)
			if f := c.next(); !errors.Is(f.err, io.EOF) {
				t.Fatalf("after the final document: %+v, want the end of the answer", f)
			}
			rg.settle(t)
			if rg.ss.Len() != 0 || rg.h.Subscribed() != 0 {
				t.Fatalf("open %d, subscribed %d after the final document", rg.ss.Len(), rg.h.Subscribed())
			}

			c = rg.open(t, 0) // opened on a document already final
			c.event(3)
			if f := c.next(); !errors.Is(f.err, io.EOF) {
				t.Fatalf("after the final first document: %+v, want the end of the answer", f)
			}
			if rg.ss.Len() != 0 || rg.h.Subscribed() != 0 {
				t.Fatalf("open %d, subscribed %d after the final first document", rg.ss.Len(), rg.h.Subscribed())
			}
			select {
			case r := <-rg.dropped:
				t.Fatalf("a final document's end counted as a drop (%s)", r)
			default:
			}
		})
	}
}

// On HTTP/1.1 a waiting stream has no goroutine of its own: net/http's
// two per connection are gone once it is hijacked.
func TestWaitingStreamsHoldNoGoroutine(t *testing.T) {
	rg := newRig(t, false)
	rg.settle(t)
	before := runtime.NumGoroutine()
	const n = 50
	conns := make([]*tls.Conn, 0, n)
	_ = conns
	var raws []net.Conn
	for range n {
		conn, err := net.Dial("tcp", rg.ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /map?since=1&stream=1 HTTP/1.1\r\nHost: control\r\n\r\n")
		head, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.Contains(head, "200") {
			t.Fatalf("head %q, %v", head, err)
		}
		raws = append(raws, conn)
	}
	for rg.ss.Len() < n {
		runtime.Gosched()
	}
	rg.settle(t)
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // net/http's goroutines winding down
	}
	if g := runtime.NumGoroutine(); g > before+2 {
		t.Fatalf("%d goroutines with %d streams waiting, %d before", g, n, before)
	}
	// Every one of them still gets the next change.
	rg.change(2)
	for _, c := range raws {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == "id: 2\n" {
				break
			}
		}
	}
}

// A client that closes its side is let go at the wheel's next visit of
// its stream, before any write fails, and that is no drop.
// The client's leaving is seen on the socket itself, also through TLS and
// control's per-address connection limit (which once hid the socket: such
// streams were held until a heartbeat's write failed, two periods on).
func TestClientThatLeftIsLetGoAtTheNextVisit(t *testing.T) {
	limit := func(ln net.Listener) net.Listener { return connlimit.Listen(ln, connlimit.Config{PerAddr: 8}) }
	for name, o := range map[string]rigServer{"TCP": {}, "TLS behind the connection limit": {tls: true, wrap: limit}} {
		t.Run(name, func(t *testing.T) { clientThatLeftIsLetGo(t, o) })
	}
}

func clientThatLeftIsLetGo(t *testing.T, o rigServer) {
	rg := newRigOn(t, o)
	c := rg.open(t, 0)
	c.event(1)
	rg.onWheel(t, 1)
	c.conn.Close()
	for rg.ss.Len() == 1 {
		rg.clk.Advance(time.Second)
		rg.settle(t)
		if rg.clk.Now().Unix() > 1_800_000_000+30 {
			t.Fatal("still open 30 s (ten visits) after the client left")
		}
	}
	select {
	case r := <-rg.dropped:
		t.Fatalf("counted as dropped (%s)", r)
	default:
	}
	if rg.h.Subscribed() != 0 {
		t.Fatal("its subscription is left")
	}
}
