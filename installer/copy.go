package installer

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/runos/vpn/internal/atomicfile"
)

// placeBinary copies the program at src (or a file it needs beside it,
// such as wintun.dll) to dst (0755), atomically: a
// temporary file next to dst, synced, then renamed over it. Whatever was at
// dst is kept aside until commit, so undo puts it back. When src already is
// dst (runos runs from its installed path) nothing happens.
//
// It is not atomicfile.WriteFile because of that backup: the previous
// version must be renamed aside between the sync and the rename (Windows
// cannot replace a program in use, and undo needs it), and a program is
// streamed rather than held in memory.
func placeBinary(src, dst string) (p *placed, err error) {
	p = &placed{dst: dst}
	if sameFile(src, dst) {
		return p, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, fmt.Errorf("install %s: %w", dst, err)
	}
	in, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("install %s: read %s: %w", dst, src, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".new*")
	if err != nil {
		return nil, fmt.Errorf("install %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, in); err != nil {
		return nil, fmt.Errorf("install %s: copy %s: %w", dst, src, err)
	}
	if err = tmp.Chmod(0o755); err != nil {
		return nil, fmt.Errorf("install %s: %w", dst, err)
	}
	if err = tmp.Sync(); err != nil {
		return nil, fmt.Errorf("install %s: %w", dst, err)
	}
	if err = tmp.Close(); err != nil {
		return nil, fmt.Errorf("install %s: %w", dst, err)
	}
	if _, serr := os.Lstat(dst); serr == nil {
		// Moved aside rather than overwritten: Windows cannot replace a
		// program file that is in use, but it can rename it.
		p.backup = dst + ".previous"
		_ = os.Remove(p.backup)
		if err = os.Rename(dst, p.backup); err != nil {
			p.backup = ""
			return nil, fmt.Errorf("install %s: move the previous version aside: %w", dst, err)
		}
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		if p.backup != "" {
			_ = os.Rename(p.backup, dst)
		}
		return nil, fmt.Errorf("install %s: %w", dst, err)
	}
	p.changed = true
	return p, nil
}

// placed is a binary put in place, until commit or undo.
type placed struct {
	dst     string
	backup  string // the previous version, "" if there was none
	changed bool
}

// undo puts back what was at dst before.
func (p *placed) undo() error {
	if !p.changed {
		return nil
	}
	if p.backup == "" {
		return os.Remove(p.dst)
	}
	return os.Rename(p.backup, p.dst)
}

// commit drops the previous version (on Windows it may still be running:
// it is then left for the next install to remove).
func (p *placed) commit() {
	if p.backup != "" {
		_ = os.Remove(p.backup)
	}
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(fa, fb)
}

// copyFile copies src to dst with mode perm, atomically.
func copyFile(src, dst string, perm os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(dst, b, perm)
}
