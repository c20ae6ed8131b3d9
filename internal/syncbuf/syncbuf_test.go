package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestWritersAndReadersAtOnce: under -race, writes and reads from many
// goroutines at once race on nothing, and every line written is there.
func TestWritersAndReadersAtOnce(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}
