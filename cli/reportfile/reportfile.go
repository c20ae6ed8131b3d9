// Package reportfile is the archive `runos vpn bugreport` writes: a
// gzipped tar whose files sit in the folder runos-bugreport/, each 0600.
// Write makes one; Read opens one, as the tests that check what a report
// holds do.
//
// It is not where what goes into a report is decided, nor how it is
// redacted: the CLI does both before it writes.
package reportfile

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"strings"
	"time"
)

// Dir is the folder of the report's files inside the archive.
const Dir = "runos-bugreport/"

// Write writes files into a new archive at path (0600: it describes this
// machine), in the order of names (a name files lacks is left out), dated
// now, and returns the archive's size.
func Write(path string, names []string, files map[string][]byte, now time.Time) (int64, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range names {
		b, ok := files[name]
		if !ok {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: Dir + name, Mode: 0o600, Size: int64(len(b)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return 0, err
		}
		if _, err := tw.Write(b); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	if err := gz.Close(); err != nil {
		return 0, err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return 0, err
	}
	return int64(buf.Len()), nil
}

// Read opens the archive at path: its files by name, and the whole
// uncompressed tar stream, headers and all (to search every byte of it).
func Read(path string) (files map[string][]byte, raw []byte, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, nil, err
	}
	if raw, err = io.ReadAll(gz); err != nil {
		return nil, nil, err
	}
	files = map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, raw, nil
		}
		if err != nil {
			return nil, nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, err
		}
		files[strings.TrimPrefix(h.Name, Dir)] = b
	}
}
