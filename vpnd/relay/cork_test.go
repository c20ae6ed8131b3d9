package relay

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// countingConn records each write that reaches it.
type countingConn struct {
	net.Conn
	writes   [][]byte
	deadline time.Time
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func (c *countingConn) SetWriteDeadline(t time.Time) error { c.deadline = t; return nil }

// chunkedStream writes a message 4 KiB at a time, as the WebSocket
// library does a client's.
type chunkedStream struct{ c net.Conn }

func (s chunkedStream) Read([]byte) (int, error) { return 0, nil }
func (s chunkedStream) Close() error             { return nil }
func (s chunkedStream) Write(p []byte) (int, error) {
	for b := p; len(b) > 0; {
		n := min(len(b), 4096)
		if _, err := s.c.Write(b[:n]); err != nil {
			return 0, err
		}
		b = b[n:]
	}
	return len(p), nil
}

func TestCorkedStreamWritesABatchOnce(t *testing.T) {
	under := &countingConn{}
	cc := &corkConn{Conn: under}
	s := corkedStream{Stream: chunkedStream{cc}, c: cc}
	msg := bytes.Repeat([]byte("wireguard"), 10_000) // 90 kB: 22 chunks
	dl := time.Now().Add(time.Minute)
	if err := s.SetWriteDeadline(dl); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Write(msg); err != nil || n != len(msg) {
		t.Fatalf("write: %d, %v", n, err)
	}
	if len(under.writes) != 1 || !bytes.Equal(under.writes[0], msg) {
		t.Fatalf("%d writes reached the connection, want the message in one", len(under.writes))
	}
	if !under.deadline.IsZero() {
		t.Error("the held write's deadline stayed on the connection")
	}
	// Uncorked (a control frame the library writes on its own): at once.
	if _, err := cc.Write([]byte("pong")); err != nil || len(under.writes) != 2 {
		t.Fatalf("an uncorked write was held: %d writes, %v", len(under.writes), err)
	}
	// A huge batch is not kept between batches.
	if _, err := s.Write(make([]byte, 2*maxCorkKeep)); err != nil || cap(cc.buf) > maxCorkKeep {
		t.Errorf("kept %d bytes after a large batch (%v)", cap(cc.buf), err)
	}
}
