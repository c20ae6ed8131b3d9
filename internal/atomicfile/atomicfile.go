// Package atomicfile replaces files so that a reader, or a crash, sees the
// old content or the new, never half of either: the daemon's state, the
// gateway's key, the CLI's config and keystore, the installer's files, the
// lab's records and split DNS's files all go through it.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/runos/vpn/internal/fault"
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
//
// The fault points "<base>-temp" (the temporary file written and synced,
// not yet renamed) and "<base>-renamed" (renamed, the directory not yet
// synced) let tests stop the process between the steps (internal/fault).
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
	fault.Point(filepath.Base(path) + "-temp")
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	fault.Point(filepath.Base(path) + "-renamed")
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

// StaleTemps lists the temporary files WriteFile may have left next to path
// when the process died between writing one and renaming it.
func StaleTemps(path string) []string {
	dir, base := filepath.Dir(path), filepath.Base(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), "."+base+".tmp") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// Load reads what WriteFile wrote at path, at most max bytes, and hands it
// to parse: for files a program keeps for itself and can make again (a
// cached map). ok is false when there is no file. A file parse refuses,
// or one larger than max, is removed and reported: the next write
// replaces it, and a bad file must not be refused at every start.
func Load(path string, max int64, parse func([]byte) error) (ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return false, err
	}
	if int64(len(b)) > max {
		err = fmt.Errorf("larger than %d bytes", max)
	} else {
		err = parse(b)
	}
	if err != nil {
		_ = os.Remove(path)
		return false, fmt.Errorf("%s is not usable (%v): removed it", path, err)
	}
	return true, nil
}
