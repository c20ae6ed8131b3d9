package repotest

import (
	"compress/zlib"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// maxTreeWeight bounds the tracked tree as git stores it: each file
// compressed on its own, as a loose object is (zlib). The bytes on disk are
// not the measure: the Go sources alone are over 3 MB of text, while what
// weighs on every clone is what git keeps (the 27 MB binary was 84 % of
// the packed repository).
const maxTreeWeight = 3 << 20

func TestTreeWeight(t *testing.T) {
	top, files := trackedFiles(t)
	var raw, stored int64
	for _, name := range files {
		p := filepath.Join(top, name)
		fi, err := os.Lstat(p)
		if os.IsNotExist(err) || err == nil && !fi.Mode().IsRegular() {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var c countWriter
		z := zlib.NewWriter(&c)
		n, err := io.Copy(z, f)
		f.Close()
		if err == nil {
			err = z.Close()
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		raw, stored = raw+n, stored+c.n
	}
	t.Logf("%d tracked files: %d bytes, %d as git stores them", len(files), raw, stored)
	if stored > maxTreeWeight {
		t.Errorf("the tracked tree weighs %d bytes as git stores it, over %d: build output or generated data in git?", stored, maxTreeWeight)
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
