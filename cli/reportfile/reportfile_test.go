package reportfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWriteThenRead: what Write puts in, in its order and owner-only, Read
// gives back by name, and the raw stream names each file in Dir.
func TestWriteThenRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.tar.gz")
	files := map[string][]byte{"b.txt": []byte("bee\n"), "a.json": []byte(`{"a":1}`), "unlisted": []byte("x")}
	n, err := Write(path, []string{"b.txt", "missing", "a.json"}, files, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != n || st.Mode().Perm() != 0o600 {
		t.Fatalf("stat %v, %v; want %d bytes, 0600", st, err, n)
	}
	got, raw, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["b.txt"]) != "bee\n" || string(got["a.json"]) != `{"a":1}` {
		t.Errorf("read back %q", got)
	}
	if i, j := strings.Index(string(raw), Dir+"b.txt"), strings.Index(string(raw), Dir+"a.json"); i < 0 || j < i {
		t.Errorf("b.txt at %d, a.json at %d in the tar stream: want both, in Write's order", i, j)
	}
}
