// Package atomicfile replaces files so that a reader, or a crash, sees the
// old content or the new, never half of either: the daemon's state, the
// gateway's key, the CLI's config and keystore, the installer's files, the
// lab's records and split DNS's files all go through it.
package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data: a temporary file in the same directory
// (named ".<base>.tmp…", mode perm before any byte is written), synced,
// renamed over path, and the directory synced so the rename survives a
// crash. On failure path is untouched and the temporary file is removed.
// The directory must exist.
//
// A rename onto a bind-mounted file fails with EBUSY (containers, `ip netns
// exec`); the error wraps it, so a caller that must change such a file can
// tell and rewrite it in place instead.
func WriteFile(path string, data []byte, perm fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	SyncDir(dir)
	return nil
}

// SyncDir makes a rename in dir durable. A failure (some file systems, and
// Windows, cannot sync a directory) costs only durability, not correctness,
// so it is not reported.
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
