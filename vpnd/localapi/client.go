package localapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/platform"
)

// Client talks to the daemon over its local socket.
type Client struct {
	Socket string
	http   *http.Client
}

// NewClient returns a client for the socket at path ("" means
// platform.SocketPath()).
func NewClient(path string) *Client {
	if path == "" {
		path = platform.SocketPath()
	}
	c := &Client{Socket: path}
	c.http = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return platform.Dial(ctx, path)
		},
		DisableCompression: true,
	}}
	return c
}

// ErrNoDaemon is returned (wrapped) when the socket cannot be reached.
var ErrNoDaemon = errors.New("the RunOS VPN daemon is not running")

// StoppedError is returned when the daemon went away in the middle of a
// call (it was stopped or crashed after taking the request): what was asked
// may or may not have taken effect, and the daemon's status after it
// restarts says which.
type StoppedError struct{ Err error }

func (e *StoppedError) Error() string {
	return "the RunOS VPN daemon stopped during the call (" + e.Err.Error() + "); it may have taken effect: check `runos vpn status`"
}

func (e *StoppedError) Unwrap() error { return e.Err }

// Error is an error answer of the daemon; it shares control's shape.
type Error = api.Error

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	// The host is fixed: the daemon refuses any other Host header, so a web
	// page cannot reach it through a DNS-rebound name.
	req, err := http.NewRequestWithContext(ctx, method, "http://local.runos"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.callErr(ctx, err)
	}
	defer resp.Body.Close()
	if err := decode(resp, out); err != nil {
		var ae *Error
		if !errors.As(err, &ae) && ctx.Err() == nil {
			var se *json.SyntaxError
			if !errors.As(err, &se) {
				return &StoppedError{Err: err} // the answer was cut off
			}
		}
		return err
	}
	return nil
}

// callErr tells a daemon that is not running (the dial failed: nothing was
// asked) from one that went away after taking the request.
func (c *Client) callErr(ctx context.Context, err error) error {
	var oe *net.OpError
	switch {
	case errors.As(err, &oe) && oe.Op == "dial":
		return fmt.Errorf("%w (socket %s: %v); start it with: sudo runos vpn install", ErrNoDaemon, c.Socket, oe.Err)
	case ctx.Err() != nil:
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &StoppedError{Err: err}
}

func decode(resp *http.Response, out any) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
			eb.Error.Status = resp.StatusCode
			return eb.Error
		}
		return &Error{Status: resp.StatusCode, Code: http.StatusText(resp.StatusCode), Message: strings.TrimSpace(string(b))}
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	if raw, ok := out.(*[]byte); ok { // an answer that is not JSON (a profile)
		*raw = b
		return nil
	}
	return json.Unmarshal(b, out)
}

// Status returns the daemon's state.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
}

// Version returns the daemon's build.
func (c *Client) Version(ctx context.Context) (*Version, error) {
	var v Version
	return &v, c.do(ctx, http.MethodGet, "/v1/version", nil, &v)
}

// SetSession hands a session to the daemon.
func (c *Client) SetSession(ctx context.Context, r SessionRequest) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodPost, "/v1/session", r, &s)
}

// EndSession disconnects everything and ends the session (vpn down).
func (c *Client) EndSession(ctx context.Context) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodDelete, "/v1/session", nil, &s)
}

// Connect joins a cluster.
func (c *Client) Connect(ctx context.Context, cid string) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodPost, "/v1/connect", ConnectRequest{CID: cid}, &s)
}

// ConnectWith joins a cluster, telling the daemon the default cluster too.
func (c *Client) ConnectWith(ctx context.Context, req ConnectRequest) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodPost, "/v1/connect", req, &s)
}

// Disconnect leaves a cluster.
func (c *Client) Disconnect(ctx context.Context, cid string) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodPost, "/v1/disconnect", ConnectRequest{CID: cid}, &s)
}

// Watch calls fn with the current status and then with every change until
// fn returns false, ctx ends or the stream breaks (the error says which).
func (c *Client) Watch(ctx context.Context, fn func(*Status) bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://local.runos/v1/watch", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.callErr(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return decode(resp, nil)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		var s Status
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return fmt.Errorf("watch: bad line from daemon: %w", err)
		}
		if !fn(&s) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return io.ErrUnexpectedEOF
}

// Logs returns the daemon's recent log lines (root, the operator and the
// runos group only).
func (c *Client) Logs(ctx context.Context) (*Logs, error) {
	var l Logs
	return &l, c.do(ctx, http.MethodGet, "/v1/logs", nil, &l)
}

// Probe asks the daemon for a fresh handshake with cid's server now.
func (c *Client) Probe(ctx context.Context, r ProbeRequest) (*ProbeResult, error) {
	var p ProbeResult
	return &p, c.do(ctx, http.MethodPost, "/v1/probe", r, &p)
}
