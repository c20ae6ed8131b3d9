package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new" {
		t.Fatalf("read %q, %v", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d entries, want only the file", len(ents))
	}
}

// A failed replace leaves the old file as it was and no temporary file.
func TestWriteFileFailureChangesNothing(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "inside"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A rename over a non-empty directory fails.
	if err := WriteFile(target, []byte("new"), 0o600); err == nil {
		t.Fatal("replaced a non-empty directory")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d entries after the failure, want 1", len(ents))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Error("wrote into a directory that does not exist")
	}
}

func TestLoadRemovesWhatCannotBeUsed(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kept.json")
	parse := func(b []byte) error {
		if string(b) != "good" {
			return errors.New("not good")
		}
		return nil
	}
	if ok, err := Load(p, 16, parse); ok || err != nil {
		t.Fatalf("no file: ok %v, err %v", ok, err)
	}
	for _, c := range []struct {
		data string
		ok   bool
	}{{"good", true}, {"bad", false}, {strings.Repeat("g", 17), false}} {
		if err := WriteFile(p, []byte(c.data), 0o600); err != nil {
			t.Fatal(err)
		}
		ok, err := Load(p, 16, parse)
		if ok != c.ok || (err == nil) != c.ok {
			t.Fatalf("%.20q: ok %v, err %v", c.data, ok, err)
		}
		_, statErr := os.Stat(p)
		if kept := statErr == nil; kept != c.ok {
			t.Fatalf("%.20q: file kept %v, want %v", c.data, kept, c.ok)
		}
	}
}
