package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/reqid"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/internal/httpjson"
)

// maxBody bounds every JSON request body but a gateway's report.
const maxBody = 4 << 20

// maxReportBody bounds a gateway's report, the one body that grows with
// the devices: a handshake per device of the cluster, ~90 bytes each
// (100,000 devices on one VPN server ≈ 9 MB, which the fan-out benchmark
// reaches). Only an enrolled node sends it.
const maxReportBody = 32 << 20

// jsonAppender is a body that encodes itself, without reflection, to what
// json.Marshal would give: the device map, written 10,000 times after a
// move.
type jsonAppender interface {
	appendJSON([]byte) []byte
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	if a, ok := v.(jsonAppender); ok {
		httpjson.WriteEncoded(w, status, a.appendJSON(make([]byte, 0, 1024)))
		return
	}
	if err := httpjson.Write(w, status, v); err != nil {
		writeError(w, &api.Error{Status: 500, Code: "internal", Message: "internal error: the answer could not be encoded"})
	}
}

func writeError(w http.ResponseWriter, e *api.Error) {
	if e.Status == 0 {
		e.Status = http.StatusInternalServerError
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="runos"`)
	}
	b, _ := json.Marshal(api.ErrorBody{Error: e})
	httpjson.WriteEncoded(w, e.Status, b)
}

func errInvalid(format string, args ...any) *api.Error {
	return &api.Error{Status: 400, Code: api.CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

func errNotFound(format string, args ...any) *api.Error {
	return &api.Error{Status: 404, Code: api.CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

func errConflict(msg, hint string) *api.Error {
	return &api.Error{Status: 409, Code: api.CodeConflict, Message: msg, Hint: hint}
}

func errRefused(msg, hint string) *api.Error {
	return &api.Error{Status: 409, Code: api.CodeRefused, Message: msg, Hint: hint}
}

// errStoreUnavailable answers while the database cannot be reached: the
// client retries (its backoff), and nothing was changed.
var errStoreUnavailable = &api.Error{Status: 503, Code: api.CodeUnavailable, Message: "store unavailable",
	Hint: "control cannot reach its database right now; retry in a moment"}

func errForbidden(msg, hint string) *api.Error {
	return &api.Error{Status: 403, Code: api.CodeForbidden, Message: msg, Hint: hint}
}

// fail answers what a handler's logic returned (see asError).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, s.asError(r.Context(), err))
}

// asError turns what a handler's logic returned into the answer: an
// *api.Error as it is, a missing record as 404, anything else as 500,
// logged with the request's id and answered with the id alone (the
// error's text is control's business, not the caller's).
func (s *Server) asError(ctx context.Context, err error) *api.Error {
	var e *api.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, store.ErrNotFound):
		return errNotFound("%v", err)
	case errors.Is(err, store.ErrUnavailable):
		s.log.Warn("store unavailable", "requestId", reqid.From(ctx), "err", err)
		return errStoreUnavailable
	}
	return s.internal(ctx, "request failed", err)
}

// internal logs err with the request's id and returns the generic answer
// that names only the id.
func (s *Server) internal(ctx context.Context, what string, err error) *api.Error {
	id := reqid.From(ctx)
	s.log.Error(what, "requestId", id, "err", err)
	return &api.Error{Status: 500, Code: "internal", Message: "internal error (request " + id + ")",
		Hint: "retry; if it persists, give runos-control's operator the request id " + id + " (it is in control's log)"}
}

// decode reads one strict JSON object into v: unknown fields are refused,
// so that nothing but the documented fields is ever accepted (a device
// registration carries its public key and nothing else secret).
func decode(r *http.Request, v any) *api.Error { return decodeUpTo(r, v, maxBody) }

// decodeUpTo is decode with its own bound on the body.
func decodeUpTo(r *http.Request, v any, limit int) *api.Error {
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		return errInvalid("read body: %v", err)
	}
	if len(body) > limit {
		return errInvalid("body larger than %d bytes", limit)
	}
	return decodeBytes(body, v)
}

func decodeBytes(body []byte, v any) *api.Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errInvalid("invalid JSON body: %v", err)
	}
	if dec.More() {
		return errInvalid("invalid JSON body: more than one JSON value")
	}
	return nil
}

// Long-poll parameters (docs/internals.md "Push").
const (
	defaultWait = 60 * time.Second
	maxWait     = 300 * time.Second
)

func pollParams(r *http.Request) (since uint64, wait time.Duration, e *api.Error) {
	q := r.URL.Query()
	if v := q.Get(api.ParamSince); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, errInvalid("%s=%q: want a version number", api.ParamSince, v)
		}
		since = n
	}
	wait = defaultWait
	if v := q.Get(api.ParamWait); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, 0, errInvalid("%s=%q: want seconds, 0 to %d", api.ParamWait, v, int(maxWait/time.Second))
		}
		wait = min(time.Duration(n)*time.Second, maxWait)
	}
	return since, wait, nil
}
