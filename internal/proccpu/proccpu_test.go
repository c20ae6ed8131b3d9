//go:build linux

package proccpu

import (
	"os"
	"testing"
	"time"
)

// TestCounts: a busy loop shows in both readings of this process.
func TestCounts(t *testing.T) {
	s0, o0 := Self(), Of(os.Getpid())
	for end := time.Now().Add(150 * time.Millisecond); time.Now().Before(end); {
	}
	if Self() <= s0 {
		t.Errorf("Self did not grow past %v", s0)
	}
	if o := Of(os.Getpid()); o < o0 || o == 0 {
		t.Errorf("Of(self) = %v after %v", o, o0)
	}
	if Of(-1) != 0 {
		t.Error("Of(-1) should be 0")
	}
}
