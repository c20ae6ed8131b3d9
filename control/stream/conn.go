package stream

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/runos/vpn/api"
)

// headroom is kept free at the start of every frame buffer for the chunk
// size line of HTTP/1.1's chunked encoding, so that a frame goes out in
// one write (one TLS record, one system call).
const headroom = 18

// sink is where a stream's frames go.
type sink interface {
	// write writes one frame, b[headroom:], within the write timeout.
	write(b []byte) error
	// end writes final[headroom:] when given, then the end of the answer,
	// and lets the connection go.
	end(final []byte)
	// gone reports whether the client closed its side (false when that
	// cannot be told without a write).
	gone() bool
}

// hijackedSink is an HTTP/1.1 connection taken from net/http: the answer
// is written chunked by hand.
type hijackedSink struct {
	c       net.Conn
	tcp     *net.TCPConn // under c (TLS), nil if not TCP
	timeout time.Duration
	mu      sync.Mutex // end may race a write from the stream's goroutine
	err     error
}

// writeHead writes the answer's head and the first frame (b, possibly
// empty past its headroom) in one write.
func (hs *hijackedSink) writeHead(head, b []byte) error {
	out := head
	if len(b) > headroom {
		out = append(out, chunk(b)...)
	}
	return hs.send(out)
}

func (hs *hijackedSink) write(b []byte) error { return hs.send(chunk(b)) }

func (hs *hijackedSink) send(b []byte) error {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.err != nil {
		return hs.err
	}
	// The deadline is armed only while writing: a stream that waits has
	// no timer in the runtime either.
	hs.c.SetWriteDeadline(time.Now().Add(hs.timeout)) // the kernel's clock, not the wheel's
	_, err := hs.c.Write(b)
	hs.c.SetWriteDeadline(time.Time{})
	hs.err = err
	return err
}

func (hs *hijackedSink) gone() bool { return hs.tcp != nil && peerDone(hs.tcp) }

func (hs *hijackedSink) end(final []byte) {
	var out []byte
	if len(final) > headroom {
		out = chunk(final)
	}
	hs.send(append(out, "0\r\n\r\n"...))
	hs.c.Close()
}

// chunk turns b (a frame after headroom bytes) into one chunk of the
// chunked encoding, in place: the size line goes into the headroom.
func chunk(b []byte) []byte {
	n := len(b) - headroom
	var size [16]byte
	line := strconv.AppendInt(size[:0], int64(n), 16)
	line = append(line, '\r', '\n')
	start := headroom - len(line)
	copy(b[start:], line)
	return append(b[start:], '\r', '\n')
}

// parkedSink writes through net/http (HTTP/2, or an HTTP/1.1 connection
// that cannot be hijacked): the handler's goroutine waits in between.
type parkedSink struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (ps *parkedSink) write(b []byte) error {
	_ = ps.rc.SetWriteDeadline(time.Now().Add(ps.timeout))
	_, err := ps.w.Write(b[headroom:])
	if err == nil {
		err = ps.rc.Flush()
	}
	_ = ps.rc.SetWriteDeadline(time.Time{})
	return err
}

// gone is false: net/http tells a parked stream's handler of a client that
// went away (its context ends).
func (ps *parkedSink) gone() bool { return false }

func (ps *parkedSink) end(final []byte) {
	if len(final) > headroom {
		ps.write(final)
	}
}

// appendHead is the head of a hijacked stream's answer: status, the
// headers the handlers set, chunked encoding, and the connection closes
// with the stream.
func appendHead(b []byte, h http.Header) []byte {
	b = append(b, "HTTP/1.1 200 OK\r\n"...)
	for k, vs := range h {
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "Date: "...)
	b = time.Now().UTC().AppendFormat(b, http.TimeFormat)
	return append(b, "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"...)
}

// appendDoc appends one document event. The document's JSON is appended
// in place; compact JSON has no newline, and should one appear the event
// is encoded again with it split into data lines.
func appendDoc(b []byte, event string, version uint64, doc func([]byte) []byte) []byte {
	start := len(b)
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, "\nid: "...)
	b = strconv.AppendUint(b, version, 10)
	b = append(b, "\ndata: "...)
	at := len(b)
	b = doc(b)
	if bytes.IndexByte(b[at:], '\n') >= 0 {
		data := bytes.Clone(b[at:])
		return api.AppendEvent(b[:start], event, version, data)
	}
	return append(b, "\n\n"...)
}

// Frame buffers are borrowed for one write and given back: a waiting
// stream holds none. Large ones (a gateway map with thousands of peers)
// are left to the GC rather than kept in the pool.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= 64<<10 {
		bufPool.Put(b)
	}
}
