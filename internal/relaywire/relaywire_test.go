package relaywire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	var b []byte
	var err error
	packets := [][]byte{{4, 0, 0, 0, 1, 2, 3}, bytes.Repeat([]byte{9}, 1500), bytes.Repeat([]byte{7}, MaxPayload)}
	for i, p := range packets {
		if b, err = AppendFrame(b, FrameData, p); err != nil {
			t.Fatal(err)
		}
		if i == 0 { // a frame of a type this reader does not know is skipped
			if b, err = AppendFrame(b, 0x7f, []byte("future")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One byte at a time: frames must not depend on how reads split.
	r := NewReader(&oneByte{bytes.NewReader(b)})
	buf := make([]byte, MaxPayload)
	for i, want := range packets {
		n, err := r.ReadData(buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(buf[:n], want) {
			t.Fatalf("frame %d: got %d bytes, want %d", i, n, len(want))
		}
	}
	if _, err := r.ReadData(buf); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func TestFrameErrors(t *testing.T) {
	if _, err := AppendFrame(nil, FrameData, make([]byte, MaxPayload+1)); err == nil {
		t.Error("an oversized frame was written")
	}
	if _, err := AppendFrame(nil, FrameData, nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty data frame: %v", err)
	}
	buf := make([]byte, 100)
	for name, tc := range map[string]struct {
		in   []byte
		want error
	}{
		"cut in the header":  {[]byte{FrameData, 0}, io.ErrUnexpectedEOF},
		"cut in the payload": {[]byte{FrameData, 0, 5, 1, 2}, io.ErrUnexpectedEOF},
		"cut in a skipped":   {[]byte{9, 0, 5, 1}, io.ErrUnexpectedEOF},
		"empty data":         {[]byte{FrameData, 0, 0}, ErrEmpty},
	} {
		if _, err := NewReader(bytes.NewReader(tc.in)).ReadData(buf); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	big, _ := AppendFrame(nil, FrameData, make([]byte, 101))
	if _, err := NewReader(bytes.NewReader(big)).ReadData(buf); err == nil {
		t.Error("a frame larger than the buffer was read")
	}
}

func TestMessageType(t *testing.T) {
	if MessageType([]byte{1, 0, 0, 0, 5}) != MsgInitiation || MessageType([]byte{4, 0}) != 0 {
		t.Error("MessageType")
	}
}

// FuzzReader feeds arbitrary bytes (what a hostile peer of the relay could
// send) to the frame reader: it must never panic, never return more than
// the buffer or an empty datagram, and every datagram it returns must be
// one a writer could have framed so.
func FuzzReader(f *testing.F) {
	seed := func(ps ...[]byte) []byte {
		var b []byte
		for _, p := range ps {
			b, _ = AppendFrame(b, FrameData, p)
		}
		return b
	}
	f.Add(seed([]byte{1, 0, 0, 0, 9}, []byte{4, 0, 0, 0}))
	f.Add([]byte{FrameData, 0xff, 0xff})
	f.Add([]byte{0x55, 0, 3, 1, 2, 3, FrameData, 0, 1, 7})
	f.Add([]byte{FrameData, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		buf := make([]byte, 2048)
		for range 1000 {
			n, err := r.ReadData(buf)
			if err != nil {
				return
			}
			if n <= 0 || n > len(buf) {
				t.Fatalf("datagram of %d bytes", n)
			}
			again, err := AppendFrame(nil, FrameData, buf[:n])
			if err != nil || len(again) != n+HeaderLen {
				t.Fatalf("re-framing %d bytes: %v", n, err)
			}
		}
	})
}

type oneByte struct{ r io.Reader }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}
