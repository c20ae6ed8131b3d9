package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNoStream is returned by the Watch methods when control answered a
// stream request with one document, as a control older than streams does
// (the document was given to each first): the caller long-polls instead.
var ErrNoStream = errors.New("control answered with one document, not a stream (a control older than push streams)")

// A stream silent for StreamIdlePeriods of control's heartbeat period,
// plus up to one more period of jitter drawn for each stream, is taken for
// dead and the client reconnects (docs/internals.md "Push").
//
// Why four and a jittered fifth, not three: a control replica that is
// slow for a while (on two CPUs, the survivors of a failover at 100,000
// devices were busy with the dead replica's handshakes for minutes) writes
// its heartbeats late, and with three periods every one of its streams
// timed out within the same second and reconnected at once, loading the
// replica more (docs/performance.md "Across replicas at 50,000 and
// 100,000 devices"). Four periods wait out a replica one period slower
// than the three did; the jitter spreads the streams that still time out
// over a whole period (15 s by default) rather than one second, so their
// reconnects arrive as a trickle. The price: a connection that vanished
// without a reset (a machine gone, a network cut) is noticed after 60–75 s
// instead of 45 s. A control that dies or restarts resets its connections,
// and those are noticed at once.
const StreamIdlePeriods = 4

// DefaultStreamIdle is the idle limit before jitter when control does not
// say its heartbeat: StreamIdlePeriods of control's default heartbeat
// (15 s); each stream adds up to one such period (15 s) of jitter.
const DefaultStreamIdle = StreamIdlePeriods * DefaultHeartbeat

// DefaultHeartbeat is control's default heartbeat period
// (runos-control --stream-heartbeat, control/stream), assumed by a client
// when control does not say it.
const DefaultHeartbeat = 15 * time.Second

// streamWait is the wait asked of a control that does not stream: it holds
// the request as a long-poll would.
const streamWait = 60 * time.Second

// WatchDeviceMap follows the device's map from since: each is called with
// every newer version (see Watch).
func (c *Client) WatchDeviceMap(ctx context.Context, deviceID string, since uint64, each func(*DeviceMap) error) error {
	return watch(ctx, c, "/v1/devices/"+esc(deviceID)+"/map", EventDeviceMap, since, func(m *DeviceMap) uint64 { return m.Version }, each)
}

// WatchGatewayMap follows a gateway's map (token: the node's enrollment token).
func (c *Client) WatchGatewayMap(ctx context.Context, since uint64, each func(*GatewayMap) error) error {
	return watch(ctx, c, "/v1/gateway/map", EventGatewayMap, since, func(m *GatewayMap) uint64 { return m.Version }, each)
}

// WatchVPNService follows a VPN service (runos services wireguard add --follow).
func (c *Client) WatchVPNService(ctx context.Context, cid, id string, since uint64, each func(*VPNService) error) error {
	return watch(ctx, c, servicesPath(cid)+"/"+esc(id), EventService, since, func(s *VPNService) uint64 { return s.Version }, each)
}

// WatchMove follows a move (runos services wireguard move --follow).
func (c *Client) WatchMove(ctx context.Context, id string, since uint64, each func(*Move) error) error {
	return watch(ctx, c, "/v1/moves/"+esc(id), EventMove, since, func(m *Move) uint64 { return m.Version }, each)
}

// watch holds one push stream of the document at path (docs/internals.md
// "Push"): one request, then each is called with every version newer than
// since, in order, until ctx ends, the connection drops or goes silent for
// longer than its idle limit (streamIdle: four heartbeats and up to a fifth),
// control ends the stream (an EventError is returned as
// its *Error, e.g. 401 session_expired), or each returns an error. It
// always returns an error; the caller resumes with the last version it was
// given, so nothing is missed or repeated across reconnects.
//
// A control that does not stream answers one document, as a long-poll:
// each is given it when it is news (since 0, or another version) and
// ErrNoStream is returned.
func watch[T any](ctx context.Context, c *Client, path, event string, since uint64, version func(*T) uint64, each func(*T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	q := url.Values{}
	q.Set(ParamSince, strconv.FormatUint(since, 10))
	q.Set(ParamWait, strconv.Itoa(int(streamWait/time.Second)))
	q.Set(ParamStream, "1")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", StreamContentType+", application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if rt := c.resumes.get(path); rt != "" {
		req.Header.Set(HeaderResume, rt)
	}
	hc := c.StreamHTTP
	if hc == nil {
		hc = c.HTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return answerError(resp.StatusCode, http.MethodGet, path, b)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != StreamContentType {
		b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
		if err != nil {
			return err
		}
		var doc T
		if err := json.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("GET %s: decode answer: %w", path, err)
		}
		if v := version(&doc); since == 0 || v != since {
			if err := each(&doc); err != nil {
				return err
			}
		}
		return ErrNoStream
	}
	c.resumes.put(path, resp.Header.Get(HeaderResume))
	idle := streamIdle(resp.Header.Get(HeaderHeartbeat), rand.Int64N)
	body := &idleReader{r: resp.Body, idle: idle}
	body.t = time.AfterFunc(idle, func() { cancel(fmt.Errorf("stream %s: nothing from control for %s", path, idle.Round(time.Second))) })
	defer body.stop()
	er := NewEventReader(body, 0)
	for {
		ev, err := er.Next()
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil && !errors.Is(cause, context.Canceled) {
				return cause // the idle limit, or the caller's deadline
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("stream %s: control ended it", path)
			}
			return fmt.Errorf("stream %s: %w", path, err)
		}
		switch ev.Name {
		case EventError:
			var se StreamError
			if json.Unmarshal(ev.Data, &se) != nil || se.Error == nil {
				return fmt.Errorf("stream %s: control ended it with an error it did not say", path)
			}
			se.Error.Status = se.Status
			return se.Error
		case event:
			var doc T
			if err := json.Unmarshal(ev.Data, &doc); err != nil {
				return fmt.Errorf("stream %s: decode event %d: %w", path, ev.ID, err)
			}
			if err := each(&doc); err != nil {
				return err
			}
		}
	}
}

// answerError is a non-2xx answer as *Error (its body's when it has one).
func answerError(status int, method, path string, b []byte) error {
	var eb ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
		eb.Error.Status = status
		return eb.Error
	}
	return &Error{Status: status, Code: http.StatusText(status),
		Message: fmt.Sprintf("%s %s: %s", method, path, strings.TrimSpace(string(b)))}
}

// streamIdle is one stream's idle limit: StreamIdlePeriods of the
// heartbeat period control announced in heartbeat (HeaderHeartbeat,
// seconds; its default when absent or not a positive number), plus a
// jitter in [0, one period) drawn with randN (a number in [0, n); the
// stream's, fixed for its life).
func streamIdle(heartbeat string, randN func(n int64) int64) time.Duration {
	period := DefaultHeartbeat
	if s, err := strconv.Atoi(heartbeat); err == nil && s > 0 {
		period = time.Duration(s) * time.Second
	}
	return StreamIdlePeriods*period + time.Duration(randN(int64(period)))
}

// idleReader pushes the stream's idle deadline back on every read that
// brings bytes (an event or a heartbeat).
type idleReader struct {
	r    io.Reader
	idle time.Duration
	mu   sync.Mutex
	t    *time.Timer
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.mu.Lock()
		if ir.t != nil {
			ir.t.Reset(ir.idle)
		}
		ir.mu.Unlock()
	}
	return n, err
}

func (ir *idleReader) stop() {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	if ir.t != nil {
		ir.t.Stop()
		ir.t = nil
	}
}

// resumeBook keeps the last resume token control gave each stream
// (HeaderResume), to show on the next connection. A nil book keeps none.
type resumeBook struct {
	mu sync.Mutex
	m  map[string]string
}

func (b *resumeBook) get(path string) string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m[path]
}

// put keeps tok for path; an empty tok (a control that issues none, or
// none for this stream) forgets the one kept.
func (b *resumeBook) put(path, tok string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if tok == "" {
		delete(b.m, path)
		return
	}
	if b.m == nil {
		b.m = map[string]string{}
	}
	b.m[path] = tok
}
