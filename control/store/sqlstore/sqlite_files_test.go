//go:build !windows

package sqlstore

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// TestSQLiteFilesOwnerOnly: the database and its -wal and -shm files are 0600,
// whatever the umask, also when an older control left them looser.
func TestSQLiteFilesOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022) // the usual: files 0644 unless told otherwise
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "control.db")
	check := func(when string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if m := fi.Mode().Perm(); m != 0o600 {
				t.Errorf("%s: %s is %s, want -rw-------", when, filepath.Base(p), m)
			}
		}
	}
	s := openTestSQLite(t, path)
	n := 0
	write := func() {
		t.Helper()
		n++
		if _, err := s.Update(context.Background(), func(w store.Writer) error {
			return w.PutAccount(model.Account{AID: "acc" + string(rune('a'+n)), Name: "x"})
		}); err != nil {
			t.Fatal(err)
		}
	}
	write()
	check("new database")
	s.Close()

	if err := os.Chmod(path, 0o644); err != nil { // as an older control left it
		t.Fatal(err)
	}
	s = openTestSQLite(t, path)
	write()
	check("reopened after a chmod 644")
}

// TestSQLiteSynchronousFull: a commit is on disk before Update returns.
func TestSQLiteSynchronousFull(t *testing.T) {
	s := openTestSQLite(t, filepath.Join(t.TempDir(), "control.db"))
	var sync int
	if err := s.w.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Fatalf("synchronous = %d (%v), want 2 (FULL)", sync, err)
	}
}
