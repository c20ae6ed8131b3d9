//go:build runosfault

package fault

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Enabled reports whether this build stops at points (built with runosfault).
const Enabled = true

var (
	mu   sync.Mutex
	hits = map[string]int{}
)

// Point stops the process dead when RUNOS_FAULT names this point (and this
// is the hit it asks for); otherwise it counts the hit and returns.
func Point(name string) {
	want, nth := parse(os.Getenv("RUNOS_FAULT"))
	if want != name {
		return
	}
	mu.Lock()
	hits[name]++
	n := hits[name]
	mu.Unlock()
	if n != nth {
		return
	}
	fmt.Fprintf(os.Stderr, "fault: stopped dead at %s\n", os.Getenv("RUNOS_FAULT"))
	os.Exit(ExitCode)
}

// parse reads "name" or "name@N" (N ≥ 1).
func parse(v string) (string, int) {
	name, count, ok := strings.Cut(v, "@")
	if !ok {
		return name, 1
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		return name, 1
	}
	return name, n
}
