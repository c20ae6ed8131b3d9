package server

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// tWriter sends log lines to the test's log until the test ends. Streams
// woken by a test's last request may still log after it (their goroutines
// are the hub's, not the HTTP server's, so closing the server does not wait
// for them); testing forbids t.Log then, so those lines are dropped.
type tWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
