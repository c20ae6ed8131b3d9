package stream

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/reqid"
)

// What a stream has been woken for.
const (
	flagChanged uint32 = 1 << iota // a topic changed: read the document
	flagRecheck                    // the tick of a caller no topic speaks for
	flagBeat                       // the wheel's visit, once a heartbeat period
	flagClose                      // control is shutting down
)

// stream is one open stream. Its state while it waits is this struct, its
// Sub's entries in the hub, its place on the wheel and the connection.
type stream struct {
	ss      *Streams
	src     Source
	sink    sink
	sub     *hub.Sub
	event   string
	reqID   string
	recheck bool
	done    func()
	dropped func(string)
	beat    func()

	flags     atomic.Uint32
	running   atomic.Bool   // HTTP/1.1: a goroutine is writing for it
	kick      chan struct{} // HTTP/2: wakes the handler that waits
	lastWrite atomic.Int64  // unix ns of the last frame or heartbeat

	mu     sync.Mutex
	wakes  []hub.Wake // to answer once what they brought is written
	closed bool

	sent uint64 // the version last written; only the writer touches it
	seen uint64 // the newest topic version that made it read again; likewise

	slot, pos int // on the wheel, under its lock
}

// wake is the stream's hub.Sub callback, in the publisher's goroutine.
func (st *stream) wake(w hub.Wake) {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		w.Answered()
		return
	}
	if w != (hub.Wake{}) {
		st.wakes = append(st.wakes, w)
	}
	st.mu.Unlock()
	st.signal(flagChanged)
}

// signal records why the stream is woken and makes sure it runs: on
// HTTP/1.1 a goroutine is started unless one is running (it looks at the
// flags again before it ends), on HTTP/2 the waiting handler is kicked.
func (st *stream) signal(f uint32) {
	st.flags.Or(f)
	if st.kick != nil {
		select {
		case st.kick <- struct{}{}:
		default:
		}
		return
	}
	if st.running.CompareAndSwap(false, true) {
		go st.run()
	}
}

func (st *stream) run() {
	for {
		st.process()
		st.running.Store(false)
		if st.flags.Load() == 0 || !st.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// park is the HTTP/2 stream's wait, in its handler's goroutine.
func (st *stream) park(ctx context.Context) {
	for {
		select {
		case <-st.kick:
			st.process()
		case <-ctx.Done():
			st.end(nil, "gone")
		}
		st.mu.Lock()
		closed := st.closed
		st.mu.Unlock()
		if closed {
			return
		}
	}
}

// process does what the flags ask: read the document and write it when it
// is newer than what was sent, or write a heartbeat, or end the stream.
func (st *stream) process() {
	f := st.flags.Swap(0)
	st.mu.Lock()
	wakes, closed := st.wakes, st.closed
	st.wakes = nil
	st.mu.Unlock()
	defer func() {
		for _, w := range wakes {
			w.Answered()
		}
	}()
	if closed {
		return
	}
	if f&flagClose != 0 {
		st.end(nil, "")
		return
	}
	// One reading of the clock for the whole visit: the write is
	// stamped with the time the visit began, so a clock that moves while
	// it writes (a test's, once the client has the frame) does not make
	// the stream look quieter or busier than it was.
	now := st.ss.cfg.Clock.Now().UnixNano()
	buf := getBuf()
	b := (*buf)[:headroom]
	defer func() { *buf = b[:0]; putBuf(buf) }()
	if f&(flagChanged|flagRecheck) != 0 {
		d, err := st.src.Load(reqid.With(st.ss.loads.context(), st.reqID))
		if err != nil {
			st.end(append(b, errorEvent(err)...), "")
			return
		}
		if d.Version > st.sent {
			b = appendDoc(b, st.event, d.Version, d.Append)
			st.sent = d.Version
			if d.Final {
				st.end(b, "") // written, then the end of the answer
				return
			}
		}
		st.sub.Set(d.Topics...)
		// A topic newer than the read saw changed while it was read (or
		// before the Sub had it): read again, once per such version.
		if n := hub.Newest(d.Topics...); n > max(d.Known, d.Version, st.seen) {
			st.seen = n
			st.flags.Or(flagChanged) // run loops
			if st.kick != nil {
				st.signal(0)
			}
		}
	}
	beat := false
	if f&flagBeat != 0 && len(b) == headroom {
		if st.sink.gone() {
			st.end(nil, "") // the client closed its side: a plain end, not a drop
			return
		}
		// Quiet for a period less half a tick: the visits are a period
		// apart, and one that wrote just after its last visit is due now.
		quiet := time.Duration(now - st.lastWrite.Load())
		if beat = quiet >= st.ss.cfg.Heartbeat-tick/2; beat {
			b = append(b, api.Heartbeat...)
		}
	}
	if len(b) == headroom {
		return
	}
	if err := st.sink.write(b); err != nil {
		st.end(nil, dropReason(err))
		return
	}
	st.lastWrite.Store(now)
	if beat && st.beat != nil {
		st.beat()
	}
}

// end closes the stream once: final (with headroom) is written first when
// given (an error event). A reason other than "" counts as a drop.
func (st *stream) end(final []byte, reason string) {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return
	}
	st.closed = true
	wakes := st.wakes
	st.wakes = nil
	st.mu.Unlock()
	for _, w := range wakes {
		w.Answered()
	}
	if st.sub != nil {
		st.sub.Stop()
	}
	st.ss.remove(st)
	if reason != "" {
		st.ss.cfg.Logger.Debug("stream dropped", "event", st.event, "reason", reason, "requestId", st.reqID)
		if st.dropped != nil {
			st.dropped(reason)
		}
	}
	st.sink.end(final)
	if st.done != nil {
		st.done()
	}
}

// dropReason names why a write failed: "slow" when it did not finish in
// time (the client does not read), else "gone".
func dropReason(err error) string {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return "slow"
	}
	return "gone"
}

// errorEvent is the EventError that ends a stream with err.
func errorEvent(err error) []byte {
	var e *api.Error
	if !errors.As(err, &e) {
		e = &api.Error{Status: 500, Code: "internal", Message: "internal error"}
	}
	status := e.Status
	if status == 0 {
		status = 500
	}
	data, _ := json.Marshal(api.StreamError{Status: status, Error: e})
	b := append([]byte("event: "+api.EventError+"\ndata: "), data...)
	return append(b, "\n\n"...)
}
