// Package logring keeps the daemon's most recent log lines in memory, so
// that `runos vpn bugreport` can include them over the local API whatever
// the service manager does with the daemon's output (--log-file, the
// journal, launchd's file, nothing). It is an io.Writer placed beside the
// real log output; it is not a log store: lines beyond its capacity are
// dropped, oldest first, and nothing survives the process.
package logring

import (
	"bytes"
	"sync"
)

// DefaultLines is how many lines the daemon keeps: a few thousand, about
// a day of a quiet daemon's info log and the last minutes of a busy one.
const DefaultLines = 4000

// maxLine bounds one kept line; a longer one is cut (the real log keeps it).
const maxLine = 8 << 10

// Ring holds the last lines written to it. It is safe for concurrent use.
type Ring struct {
	mu      sync.Mutex
	lines   []string // circular, len == capacity once full
	next    int      // where the next line goes once full
	partial []byte   // a line written without its newline yet
	dropped uint64   // lines pushed out
}

// New returns a ring keeping the last n lines (DefaultLines if n <= 0).
func New(n int) *Ring {
	if n <= 0 {
		n = DefaultLines
	}
	return &Ring{lines: make([]string, 0, n)}
}

// Write takes log output: every complete line is kept, a trailing partial
// one waits for its end. It never fails, so it can sit in an
// io.MultiWriter beside the real output.
func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.partial = appendCapped(r.partial, p)
			break
		}
		line := appendCapped(r.partial, p[:i])
		r.partial = r.partial[:0]
		r.push(string(line))
		p = p[i+1:]
	}
	return n, nil
}

func appendCapped(dst, p []byte) []byte {
	if room := maxLine - len(dst); len(p) > room {
		p = p[:max(room, 0)]
	}
	return append(dst, p...)
}

func (r *Ring) push(line string) {
	if len(r.lines) < cap(r.lines) {
		r.lines = append(r.lines, line)
		return
	}
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	r.dropped++
}

// Lines returns the kept lines, oldest first, and how many older ones were
// dropped.
func (r *Ring) Lines() (lines []string, dropped uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.lines))
	out = append(out, r.lines[r.next:]...)
	out = append(out, r.lines[:r.next]...)
	return out, r.dropped
}
