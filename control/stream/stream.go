// Package stream is control's side of the push streams (docs/internals.md
// "Push"): a device, a gateway or an operator's --follow opens one request
// and control writes one server-sent event per new version of its
// document for as long as the connection lasts, a heartbeat when there is
// nothing to say, and an error event before it ends a stream the caller
// may no longer have.
//
// A stream costs control as little as it can while it waits, which is
// nearly always. On HTTP/1.1 the connection is taken from net/http
// (hijacked) once the answer's head is written: no goroutine waits for it
// (one runs only while there is something to write), no buffer is kept
// between writes, and no timer is armed for it. What wakes it is its
// hub.Sub (the hub tells it of every change of its topics) and one shared
// wheel that ticks every second for the heartbeats and for the callers
// whose end no topic announces. On HTTP/2 the request's handler goroutine,
// which net/http needs anyway, waits instead.
//
// Back-pressure: the kernel may queue at most SendBuffer bytes for a
// stream, and a write that cannot be handed over within WriteTimeout drops
// the stream (a client that does not read, or is gone); the client
// reconnects and resumes from the last version it saw. Control itself
// never queues more than the one frame being written.
//
// It is not where documents are made or callers checked: a Source (the
// API's handlers in control/server) does that on every wake.
package stream

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/clock"
	"github.com/runos/vpn/control/hub"
)

// Defaults of Config.
const (
	DefaultHeartbeat    = api.DefaultHeartbeat // what clients assume when not told
	DefaultWriteTimeout = 30 * time.Second
	DefaultSendBuffer   = 64 << 10
	tick                = time.Second // the wheel's: rechecks and heartbeat granularity
)

// Config configures Streams. Zero values take the defaults.
type Config struct {
	Hub   *hub.Hub
	Clock clock.Clock // the wheel's ticks and write times; nil: the real clock
	// Heartbeat is how long a stream may stay silent before a heartbeat is
	// written (announced to clients in api.HeaderHeartbeat).
	Heartbeat time.Duration
	// WriteTimeout bounds one frame's write (and, on Linux, how long sent
	// bytes may stay unacknowledged: TCP_USER_TIMEOUT): past it the stream
	// is dropped.
	WriteTimeout time.Duration
	// SendBuffer is the kernel's send buffer of a hijacked stream's
	// connection: what may be queued for a client that does not read.
	SendBuffer int
	Logger     *slog.Logger
}

// Source is what a stream carries.
type Source interface {
	// Load checks the caller again and reads the document; it runs after
	// every wake. An error ends the stream with an api.EventError (an
	// *api.Error as it is; anything else as an internal error).
	Load(ctx context.Context) (Doc, error)
}

// Doc is one read of a stream's document.
type Doc struct {
	Version uint64
	// Known is the version up to which the read saw every change of
	// Topics (at least Version): a topic newer than it after the Sub is
	// set means a change slipped in between, and the document is read
	// again.
	Known  uint64
	Topics []*hub.Topic // whose changes make a new document, the caller's own too
	// Append appends the document's compact JSON (one line).
	Append func([]byte) []byte
	// Final says the document will not change again (a finished move):
	// the stream that writes it ends after it, rather than holding a
	// connection its client is about to drop (on HTTP/1.1 control would
	// notice that only at the stream's next heartbeat visit).
	Final bool
}

// Options are a stream's own.
type Options struct {
	Event string // the event name (api.EventDeviceMap, …)
	Since uint64 // the version the client has (0: none)
	// Recheck asks for a Load every tick although no topic changed: for
	// a caller whose end no topic announces (an operator token), so that
	// it stops receiving within a second of it.
	Recheck   bool
	RequestID string
	// Done runs once when the stream ends (the metrics' count of streams).
	Done func()
	// Dropped runs when the stream is dropped for back-pressure or a
	// dead connection, with the reason ("slow", "gone").
	Dropped func(reason string)
	// Beat runs after each heartbeat written: the client is still there
	// (a device's last contact).
	Beat func()
}

// Streams holds the open streams. It is safe for concurrent use.
type Streams struct {
	cfg   Config
	wheel wheel
	loads sharedDeadline

	mu     sync.Mutex
	open   map[*stream]struct{}
	closed bool
}

// New returns Streams with its wheel running; call Close when done.
func New(cfg Config) *Streams {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.SendBuffer <= 0 {
		cfg.SendBuffer = DefaultSendBuffer
	}
	ss := &Streams{cfg: cfg, open: map[*stream]struct{}{},
		loads: sharedDeadline{timeout: cfg.WriteTimeout, every: min(time.Second, cfg.WriteTimeout/2)}}
	ss.wheel.start(cfg.Clock, cfg.Heartbeat)
	return ss
}

// Len is how many streams are open.
func (ss *Streams) Len() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.open)
}

// Close ends every stream (each client resumes elsewhere, or here once
// control is back) and stops the wheel.
func (ss *Streams) Close() {
	ss.mu.Lock()
	ss.closed = true
	all := make([]*stream, 0, len(ss.open))
	for st := range ss.open {
		all = append(all, st)
	}
	ss.mu.Unlock()
	ss.wheel.stop()
	for _, st := range all {
		st.signal(flagClose)
	}
}

// Serve answers r with a stream. first is the document as the handler
// read it (its caller checked); it is the first event when it is news to
// the client: since 0, newer than since, or since is from the future (a
// client of an older database). On HTTP/1.1 Serve returns once the stream
// is set up; on HTTP/2 it returns when the stream ends.
func (ss *Streams) Serve(w http.ResponseWriter, r *http.Request, first Doc, src Source, o Options) {
	h := w.Header()
	h["Content-Type"] = []string{api.StreamContentType}
	h["Cache-Control"] = []string{"no-store"}
	h["X-Accel-Buffering"] = []string{"no"} // proxies: pass each event on at once
	h[api.HeaderHeartbeat] = []string{strconv.Itoa(int(ss.cfg.Heartbeat / time.Second))}

	st := &stream{ss: ss, src: src, event: o.Event, recheck: o.Recheck, reqID: o.RequestID,
		done: o.Done, dropped: o.Dropped, beat: o.Beat, sent: o.Since}
	buf := getBuf()
	b := (*buf)[:headroom]
	defer func() { *buf = b[:0]; putBuf(buf) }()
	final := false // the first event is the document's last
	if o.Since == 0 || first.Version > o.Since || o.Since > ss.cfg.Hub.Global() {
		b = appendDoc(b, o.Event, first.Version, first.Append)
		st.sent = first.Version
		final = first.Final
	}

	var parked *parkedSink
	var err error
	if r.ProtoMajor == 1 {
		if hs := ss.hijack(w, b); hs != nil {
			st.sink, err = hs, hs.err
		}
	}
	if st.sink == nil {
		parked = &parkedSink{w: w, rc: http.NewResponseController(w), timeout: ss.cfg.WriteTimeout}
		st.sink, st.kick = parked, make(chan struct{}, 1)
		w.WriteHeader(http.StatusOK)
		err = parked.write(b)
	}
	if err != nil { // the client went away, or did not read, before its stream began
		if o.Dropped != nil {
			o.Dropped(dropReason(err))
		}
		if o.Done != nil {
			o.Done()
		}
		return
	}
	st.lastWrite.Store(ss.cfg.Clock.Now().UnixNano())
	if final {
		st.end(nil, "")
		return
	}

	// Nothing runs for the stream until it is set up: a wake meanwhile
	// only leaves its flag (HTTP/1.1: "running" is held; HTTP/2: the kick
	// waits in its channel for park).
	st.running.Store(true)
	st.sub = ss.cfg.Hub.Subscribe(st.wake, first.Topics...)
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		st.flags.Or(flagClose)
	} else {
		ss.open[st] = struct{}{}
		ss.mu.Unlock()
		ss.wheel.add(st)
	}
	if n := hub.Newest(first.Topics...); n > max(first.Known, first.Version) {
		st.seen = n
		st.flags.Or(flagChanged) // changed between the read and the Sub
	}
	if parked != nil {
		st.running.Store(false)
		if st.flags.Load() != 0 {
			st.signal(0)
		}
		st.park(r.Context())
		return
	}
	st.running.Store(false)
	if st.flags.Load() != 0 && st.running.CompareAndSwap(false, true) {
		go st.run()
	}
}

// hijack takes an HTTP/1.1 connection from net/http and writes the
// answer's head and the first frame (b, with headroom) on it; nil when
// the connection cannot be taken.
func (ss *Streams) hijack(w http.ResponseWriter, b []byte) *hijackedSink {
	head := appendHead(nil, w.Header())
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil
	}
	if brw != nil && brw.Writer.Buffered() > 0 {
		brw.Writer.Flush()
	}
	tcp := tcpUnder(conn)
	if tcp != nil {
		_ = tcp.SetWriteBuffer(ss.cfg.SendBuffer)
		_ = setUserTimeout(tcp, ss.cfg.WriteTimeout)
	}
	hs := &hijackedSink{c: conn, tcp: tcp, timeout: ss.cfg.WriteTimeout}
	hs.err = hs.writeHead(head, b)
	if hs.err != nil {
		conn.Close()
	}
	return hs
}

// tcpUnder is the TCP socket under c, through TLS and the wrappers that
// say what they wrap as tls.Conn does (control's per-address connection
// limit); nil when there is none.
func tcpUnder(c net.Conn) *net.TCPConn {
	for {
		switch x := c.(type) {
		case *net.TCPConn:
			return x
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
}

func (ss *Streams) remove(st *stream) {
	ss.mu.Lock()
	delete(ss.open, st)
	ss.mu.Unlock()
	ss.wheel.remove(st)
}
