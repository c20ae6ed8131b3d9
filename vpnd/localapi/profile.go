package localapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Profile returns the Go runtime profile name (heap, goroutine, …) the
// daemon serves at /v1/debug/pprof/NAME, with the query given (gc=1
// collects first, debug=1 asks for text).
func (c *Client) Profile(ctx context.Context, name string, query url.Values) ([]byte, error) {
	var b []byte
	path := "/v1/debug/pprof/" + url.PathEscape(name)
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &b); err != nil {
		return nil, err
	}
	return b, nil
}

// MemStats is the daemon's runtime.MemStats right after a collection, by
// field name (NextGC, HeapAlloc, NumGC, …): the numbers its heap profile
// in text ends with.
func (c *Client) MemStats(ctx context.Context) (map[string]uint64, error) {
	b, err := c.Profile(ctx, "heap", url.Values{"gc": {"1"}, "debug": {"1"}})
	if err != nil {
		return nil, err
	}
	return memStats(string(b)), nil
}

// memStats reads the lines such as "# NextGC = 43200512" that a heap
// profile in text (pprof's debug=1) ends with; lines of other shapes (the
// profile's records, "# PauseNs = [...]", a float) are skipped.
func memStats(profile string) map[string]uint64 {
	m := map[string]uint64{}
	for _, line := range strings.Split(profile, "\n") {
		rest, ok := strings.CutPrefix(line, "# ")
		if !ok {
			continue
		}
		name, val, ok := strings.Cut(rest, " = ")
		if !ok || strings.ContainsAny(name, " []") {
			continue
		}
		if n, err := strconv.ParseUint(val, 10, 64); err == nil {
			m[name] = n
		}
	}
	return m
}
