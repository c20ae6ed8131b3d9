// Package secretfile reads files that hold secrets given to a program by
// path (a node's enrollment token, the world file with its passwords and
// tokens), refusing one that other users can read: a secret another
// account could have copied is no longer one, and a warning in a log is
// read too late. It does not write secrets (internal/atomicfile writes
// 0600) and keeps nothing in memory beyond what it returns.
package secretfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// maxSize bounds what is read: a world file of a large team is well under it.
const maxSize = 64 << 20

// Read returns the file's content if only its owner (and root) may read it.
// The permissions are those of the file opened, not of a name that might be
// swapped between a check and the read.
func Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := Check(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSize {
		return nil, fmt.Errorf("%s is larger than %d MiB", path, maxSize>>20)
	}
	return b, nil
}

// Check refuses fi (the file at path) if it is not a regular file or other
// users may read it.
func Check(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	return checkMode(path, fi)
}
