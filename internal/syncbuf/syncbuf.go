// Package syncbuf is a text buffer that some goroutines write while
// others read it: a logger's or a child process's output that a test
// searches, or shows when it fails.
//
// It is not a pipe (a reader sees what was written so far, and never
// waits) and not for large or binary data.
package syncbuf

import (
	"strings"
	"sync"
)

// Buffer is safe for concurrent use; the zero value is empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is all that was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
