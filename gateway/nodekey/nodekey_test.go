package nodekey

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	k1, created, err := LoadOrCreate(dir, nil)
	if err != nil || !created {
		t.Fatalf("first start: created=%v err=%v", created, err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode: %v %v", st.Mode(), err)
	}
	kf := filepath.Join(dir, FileName)
	st, err = os.Stat(kf)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st.Mode(), err)
	}
	k2, created, err := LoadOrCreate(dir, nil)
	if err != nil || created {
		t.Fatalf("second start: created=%v err=%v", created, err)
	}
	if k1 != k2 {
		t.Fatal("second start returned another key")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("state dir holds %d entries, want only the key", len(ents))
	}
}

func TestTightensModes(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := LoadOrCreate(dir, nil); err != nil {
		t.Fatal(err)
	}
	kf := filepath.Join(dir, FileName)
	if err := os.Chmod(kf, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreate(dir, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(kf); st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", st.Mode().Perm())
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, want 0700", st.Mode().Perm())
	}
}

func TestDamagedKeyIsAnErrorAndKept(t *testing.T) {
	dir := t.TempDir()
	kf := filepath.Join(dir, FileName)
	secret := "not-a-key-but-maybe-secret"
	if err := os.WriteFile(kf, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := LoadOrCreate(dir, nil)
	if err == nil {
		t.Fatal("damaged key accepted")
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error echoes the file's content: %v", err)
	}
	if b, _ := os.ReadFile(kf); string(b) != secret {
		t.Fatal("damaged key file was overwritten")
	}
}
