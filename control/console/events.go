package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/runos/vpn/control/hub"
)

// events is GET /console/events: server-sent events. After every change
// of what the page shows (the hub wakes it: an audit entry of the account,
// a handshake, a join, a move's progress, the session's end) it sends the
// page's live sections again, rendered; the script puts them in place.
// Nothing polls: between changes the stream is idle but for a comment
// every KeepAlive, for proxies.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	tok := c.sessionToken(r)
	flusher, ok := w.(http.Flusher)
	if tok == "" || !ok {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 1000\n\n")
	flusher.Flush()

	ctx := c.ctx(r)
	cl := c.client(tok)
	keep := time.NewTicker(c.cfg.KeepAlive)
	defer keep.Stop()
	last := ""
	first := true
	for {
		v, topics, err := c.load(ctx, cl)
		switch {
		case errors.Is(err, errSignedOut):
			fmt.Fprint(w, "event: signedout\ndata: {}\n\n")
			flusher.Flush()
			return
		case err != nil:
			if ctx.Err() == nil {
				c.log.Warn("console: live update", "err", err)
			}
			return // the browser reconnects (retry) and reads again
		}
		// The first read sends only what changed since the page was made.
		if !first || hub.Newest(topics...) > since {
			sec, err := c.sections(v)
			if err != nil {
				c.log.Error("console: render live sections", "err", err)
				return
			}
			b, _ := json.Marshal(map[string]any{"since": v.Since, "sections": sec})
			if string(b) != last {
				last = string(b)
				fmt.Fprintf(w, "event: update\ndata: %s\n\n", b)
				flusher.Flush()
			}
		}
		first = false
		watch := c.cfg.Hub.Watch(topics...)
		if hub.Newest(topics...) > v.Since {
			watch.Stop() // changed while it was read: read again
			continue
		}
		if !wait(r.Context(), w, flusher, watch, keep) {
			return
		}
	}
}

// wait waits for watch, sending keep-alive comments meanwhile; false when
// the browser went away.
func wait(ctx context.Context, w http.ResponseWriter, flusher http.Flusher, watch *hub.Watch, keep *time.Ticker) bool {
	defer watch.Stop()
	for {
		select {
		case <-watch.C():
			return true
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": still here\n\n"); err != nil {
				return false
			}
			flusher.Flush()
		case <-ctx.Done():
			return false
		}
	}
}
