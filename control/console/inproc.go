package console

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
)

// inProcess is an http.RoundTripper that serves requests with a handler of
// this process: the console calls control's API and authorization server
// the way any client does, with no socket in between. The browser's
// address travels along (withRemote), so the API's audit entries name it.
type inProcess struct{ h http.Handler }

type remoteKey struct{}

// withRemote returns ctx carrying the browser's address.
func withRemote(ctx context.Context, remoteAddr string) context.Context {
	return context.WithValue(ctx, remoteKey{}, remoteAddr)
}

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.RequestURI = req.URL.RequestURI()
	r.Host = req.URL.Host
	if a, ok := req.Context().Value(remoteKey{}).(string); ok {
		r.RemoteAddr = a
	}
	rec := &recorder{h: http.Header{}, status: http.StatusOK}
	t.h.ServeHTTP(rec, r)
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{
		Status: strconv.Itoa(rec.status) + " " + http.StatusText(rec.status), StatusCode: rec.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.h, Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())), ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// recorder is the http.ResponseWriter of an in-process request.
type recorder struct {
	h      http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.h }

func (w *recorder) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
}

func (w *recorder) Write(p []byte) (int, error) {
	w.wrote = true
	return w.body.Write(p)
}
