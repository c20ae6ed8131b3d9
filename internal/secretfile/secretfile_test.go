//go:build !windows

package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o700, true}, {0o640, false}, {0o604, false}, {0o644, false}, {0o666, false}} {
		p := filepath.Join(dir, "tok-"+tc.mode.String())
		if err := os.WriteFile(p, []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		b, err := Read(p)
		switch {
		case tc.ok && (err != nil || string(b) != "secret\n"):
			t.Errorf("mode %s: %q, %v", tc.mode, b, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "readable by other users") || !strings.Contains(err.Error(), "chmod 600 "+p)):
			t.Errorf("mode %s: err %v, want a refusal saying what to do", tc.mode, err)
		}
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "nope")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}
