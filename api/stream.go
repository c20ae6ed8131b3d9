package api

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Push streams (docs/internals.md "Push"): GET of a long-pollable document
// with ParamStream=1 answers 200 with Content-Type StreamContentType and
// then one server-sent event per new version of the document, for as
// long as the connection lasts:
//
//	event: device_map
//	id: 1234
//	data: {"version":1234,...}
//
// (a blank line ends each event), a heartbeat comment (": heartbeat") after
// every HeaderHeartbeat seconds without an event, and, when control stops
// the stream for a reason the client must hear (the session ended, the
// device was revoked), one EventError whose data is StreamError before it
// closes. The id is the document's version: a client that reconnects with
// since=<the last id it saw> misses nothing and is sent nothing twice.
const (
	ParamStream       = "stream"            // 1: a stream instead of one answer
	StreamContentType = "text/event-stream" // what a control that streams answers with
	// HeaderHeartbeat is the response header with control's heartbeat
	// period in seconds: a client that hears nothing for four of them,
	// and up to a fifth drawn for each stream (StreamIdlePeriods), takes
	// the connection for dead.
	HeaderHeartbeat = "Runos-Heartbeat"
	// HeaderResume carries a device map stream's resume token: control
	// answers the stream with one, and a client that reconnects shows it
	// again, so that whichever replica takes the stream serves it without
	// reading the sign-in again (or, refusing it, checks it in full).
	HeaderResume = "Runos-Resume"
	EventError   = "error"
	// MaxEventSize bounds one event's data, as Do bounds an answer.
	MaxEventSize = 32 << 20
)

// Event names: the kind of document a stream carries.
const (
	EventDeviceMap  = "device_map"
	EventGatewayMap = "gateway_map"
	EventService    = "service"
	EventMove       = "move"
)

// StreamError is the data of an EventError: the answer a request would
// have had (its status and api.Error).
type StreamError struct {
	Status int    `json:"status"`
	Error  *Error `json:"error"`
}

// Heartbeat is what control writes after a quiet heartbeat period.
var Heartbeat = []byte(": heartbeat\n\n")

// AppendEvent appends one event to b. data must hold no '\r' (compact
// JSON never does); a '\n' in it becomes a line of its own.
func AppendEvent(b []byte, name string, id uint64, data []byte) []byte {
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, '\n')
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
		if !more {
			break
		}
		data = rest
	}
	return append(b, '\n')
}

// Event is one event of a stream.
type Event struct {
	Name  string // "message" when the event named none
	ID    uint64
	HasID bool
	Data  []byte
}

// EventReader reads the events of a stream (the server-sent events
// format, WHATWG HTML §9.2): lines end with "\n", "\r\n" or "\r"; comments
// (heartbeats) and unknown fields are skipped; data lines are joined with
// "\n". Control's stream is untrusted input to the daemon and the
// gateway: a line or an event larger than the bound, or an id that is not
// a version number, is an error, never a large allocation.
type EventReader struct {
	sc      *bufio.Scanner
	max     int
	started bool
}

// NewEventReader reads events from r, each at most max bytes of data (0:
// MaxEventSize).
func NewEventReader(r io.Reader, max int) *EventReader {
	if max <= 0 {
		max = MaxEventSize
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), max+64)
	sc.Split(splitLines)
	return &EventReader{sc: sc, max: max}
}

// ErrEventTooLarge is returned for an event or line over the reader's bound.
var ErrEventTooLarge = errors.New("stream: event larger than the limit")

// Next returns the next event. At the end of the stream it returns io.EOF
// (an event not ended by a blank line is dropped, as the format says).
func (er *EventReader) Next() (Event, error) {
	var ev Event
	var data []byte
	hasData := false
	for {
		line, err := er.line()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if !hasData {
				ev, data = Event{}, nil // nothing to dispatch (a heartbeat's end, or no data)
				continue
			}
			if ev.Name == "" {
				ev.Name = "message"
			}
			ev.Data = data
			return ev, nil
		}
		if line[0] == ':' {
			continue // a comment: the heartbeat
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		value = bytes.TrimPrefix(value, []byte{' '})
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			if len(data)+len(value)+1 > er.max {
				return Event{}, ErrEventTooLarge
			}
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		case "id":
			v, err := strconv.ParseUint(string(value), 10, 64)
			if err != nil {
				return Event{}, fmt.Errorf("stream: id %.40q is not a version number", value)
			}
			ev.ID, ev.HasID = v, true
		}
	}
}

// line returns the next line without its ending (valid until the next call).
func (er *EventReader) line() ([]byte, error) {
	if !er.sc.Scan() {
		switch err := er.sc.Err(); {
		case err == nil:
			return nil, io.EOF
		case errors.Is(err, bufio.ErrTooLong):
			return nil, ErrEventTooLarge
		default:
			return nil, err
		}
	}
	line := er.sc.Bytes()
	if !er.started {
		er.started = true
		line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
	}
	return line, nil
}

// splitLines splits at "\n", "\r\n" or a lone "\r". A '\r' at the end of
// what has arrived waits for one more byte (or the end) to tell which.
func splitLines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0:
		if atEOF && len(data) > 0 {
			return 0, nil, io.ErrUnexpectedEOF // a last line with no end
		}
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	return 0, nil, nil
}
