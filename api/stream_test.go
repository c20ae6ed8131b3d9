package api

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func readAll(t *testing.T, in string, max int) ([]Event, error) {
	t.Helper()
	er := NewEventReader(strings.NewReader(in), max)
	var evs []Event
	for {
		ev, err := er.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestEventReaderFraming(t *testing.T) {
	in := "\xEF\xBB\xBF: heartbeat\n\n" +
		"event: device_map\nid: 7\ndata: {\"version\":7}\n\n" +
		": heartbeat\n\n: heartbeat\n\n" +
		"event: move\r\nid: 8\r\ndata: a\r\ndata:b\r\nretry: 10\r\n\r\n" + // CRLF, two data lines, an unknown field
		"id: 9\rdata: lone CR\r\r" + // lone CRs; no name: "message"
		"event: error\ndata: {\"status\":401}\n\n" +
		"event: gateway_map\nid: 10\n\n" + // no data: not dispatched
		"event: cut\nid: 11\ndata: x\n" // no blank line before the end: dropped
	evs, err := readAll(t, in, 0)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
	want := []Event{
		{Name: "device_map", ID: 7, HasID: true, Data: []byte(`{"version":7}`)},
		{Name: "move", ID: 8, HasID: true, Data: []byte("a\nb")},
		{Name: "message", ID: 9, HasID: true, Data: []byte("lone CR")},
		{Name: "error", Data: []byte(`{"status":401}`)},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(evs), evs, len(want))
	}
	for i := range want {
		if evs[i].Name != want[i].Name || evs[i].ID != want[i].ID || evs[i].HasID != want[i].HasID || !bytes.Equal(evs[i].Data, want[i].Data) {
			t.Errorf("event %d = %+v, want %+v", i, evs[i], want[i])
		}
	}
}

func TestEventReaderRefuses(t *testing.T) {
	if _, err := readAll(t, "id: seven\ndata: x\n\n", 0); err == nil || !strings.Contains(err.Error(), "not a version number") {
		t.Errorf("a bad id: %v", err)
	}
	if _, err := readAll(t, "data: "+strings.Repeat("x", 200)+"\n\n", 100); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("a long line: %v", err)
	}
	if _, err := readAll(t, strings.Repeat("data: xxxxxxxxxx\n", 20)+"\n", 100); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("many data lines: %v", err)
	}
	if _, err := readAll(t, "data: x\n\ndata: no end", 0); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a last line with no end: %v", err)
	}
}

func TestAppendEventRoundTrip(t *testing.T) {
	b := AppendEvent(nil, EventDeviceMap, 42, []byte(`{"version":42}`))
	if string(b) != "event: device_map\nid: 42\ndata: {\"version\":42}\n\n" {
		t.Fatalf("encoded %q", b)
	}
	b = AppendEvent(b, "", 43, []byte("two\nlines"))
	b = append(b, Heartbeat...)
	evs, err := readAll(t, string(b), 0)
	if !errors.Is(err, io.EOF) || len(evs) != 2 || evs[1].Name != "message" || string(evs[1].Data) != "two\nlines" || evs[1].ID != 43 {
		t.Fatalf("decoded %+v, %v", evs, err)
	}
}

// FuzzEventReader feeds the daemon's and gateway's stream decoder
// arbitrary bytes: it never panics or returns more than its bound, and
// every event it returns reads back the same once encoded as control
// encodes events.
func FuzzEventReader(f *testing.F) {
	for _, s := range []string{
		"event: device_map\nid: 7\ndata: {\"version\":7}\n\n",
		": heartbeat\n\n",
		"event: error\ndata: {\"status\":401,\"error\":{\"code\":\"session_expired\",\"message\":\"x\"}}\n\n",
		"id: 1\r\ndata: a\r\ndata: b\r\n\r\n",
		"id: 2\rdata:  lead\r\r",
		"\xEF\xBB\xBFdata\n\n",
		"id: 18446744073709551616\ndata: x\n\n",
		"event\nid\ndata\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 1 << 10
		er := NewEventReader(bytes.NewReader(in), max)
		for {
			ev, err := er.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > max {
				t.Fatalf("event of %d bytes past the bound %d", len(ev.Data), max)
			}
			if !ev.HasID {
				continue
			}
			back, err := NewEventReader(bytes.NewReader(AppendEvent(nil, ev.Name, ev.ID, ev.Data)), max+16).Next()
			if err != nil || back.Name != ev.Name || back.ID != ev.ID || !bytes.Equal(back.Data, ev.Data) {
				t.Fatalf("event %+v read back as %+v, %v", ev, back, err)
			}
		}
	})
}
