package dnsplit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/runos/vpn/internal/atomicfile"
	"github.com/runos/vpn/internal/fault"
)

// How resolv.conf is changed so that no crash can leave DNS broken:
//
//   - The original (bytes, mode, symlink target, or that there was none) is
//     recorded in the journal, synced, before anything is written.
//   - Where the file can be replaced by a rename, it is (atomicfile): a crash
//     leaves the old file or the new, never half of either.
//   - Where it cannot (a bind-mounted file: containers, `ip netns exec`, the
//     lab's laptops), the new bytes are written over the old ones from the
//     start of the file without truncating it first, synced, and only then
//     is the file cut to the new length. A crash in between leaves the new
//     content followed by the end of the old, never an empty file.
//   - Undoing it reads what is there now and tells apart "the original"
//     (nothing to do), "ours or left half-written by us" (put the original
//     back: this includes an empty file, which an older daemon's truncate
//     left, and a file naming only our forwarder) and "another program's"
//     (keep theirs; the record of ours stays until a new change replaces it).
//
// The fault points (internal/fault) of a change are the journal's and the
// file's: "dns-changes.json-renamed" (recorded), then either
// "resolv.conf-temp" / "resolv.conf-renamed" (by rename) or
// "resolv.conf-overwritten" / "resolv.conf-truncated" (in place), each hit
// once when pointing the file at the forwarder and once when putting the
// original back, and "dns-restored" (put back, not yet forgotten).

// errLeftForeign is what undoing a change says when another program has
// replaced the file since: nothing is undone and the record is kept.
var errLeftForeign = errors.New("another program replaced it since; left as it is")

// snapshotResolvConf records path as it is now: content, permissions, and
// whether it is a symlink (resolvconf, systemd-resolved) or missing.
func snapshotResolvConf(path string) (change, error) {
	c := change{Kind: kindResolvConf, Path: path, Perm: 0o644}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		c.Missing = true
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if c.Symlink, err = os.Readlink(path); err != nil {
			return c, err
		}
	} else {
		c.Perm = fi.Mode().Perm()
	}
	b, err := os.ReadFile(path)
	if err != nil && !(c.Symlink != "" && errors.Is(err, fs.ErrNotExist)) {
		return c, err
	}
	c.Original = b
	return c, nil
}

// writeResolvConf replaces path with data: atomically where it can, in place
// where path is a bind mount. It says which it did.
func writeResolvConf(path string, data []byte, perm fs.FileMode) (inPlace bool, err error) {
	err = atomicfile.WriteFile(path, data, perm)
	if errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EXDEV) {
		return true, writeFileInPlace(path, data)
	}
	return false, err
}

// writeFileInPlace changes path through its own inode: the only way to
// change a file that is a bind mount (a rename onto it fails with EBUSY).
// The new bytes go over the old from offset 0, are synced, and only then is
// the file cut to their length: at no moment is it empty, and a crash
// between the two steps leaves the new content first (which Cleanup
// recognises as half-written by us).
func writeFileInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	base := filepath.Base(path)
	if _, err := f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("rewrite %s in place: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	fault.Point(base + "-overwritten")
	if err := f.Truncate(int64(len(data))); err != nil {
		return fmt.Errorf("rewrite %s in place: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	fault.Point(base + "-truncated")
	return f.Close()
}

// resolvState is what undoing a recorded resolv.conf change finds.
type resolvState int

const (
	resolvOriginal resolvState = iota // the original is there: nothing to undo
	resolvOurs                        // ours, or left half-written by us: put the original back
	resolvForeign                     // another program's: leave it
)

func (s resolvState) String() string {
	return [...]string{"the original", "ours", "another program's"}[s]
}

// judgeResolvConf says whose the file at c.Path is now.
func judgeResolvConf(c change) (resolvState, error) {
	fi, err := os.Lstat(c.Path)
	if errors.Is(err, fs.ErrNotExist) {
		if c.Missing {
			return resolvOriginal, nil
		}
		// Gone: nobody's file to keep, and glibc needs one.
		return resolvOurs, nil
	}
	if err != nil {
		return 0, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		// We never leave a symlink behind but the original's.
		if t, err := os.Readlink(c.Path); err == nil && c.Symlink != "" && t == c.Symlink {
			return resolvOriginal, nil
		}
		return resolvForeign, nil
	}
	cur, err := os.ReadFile(c.Path)
	if err != nil {
		return 0, err
	}
	switch {
	case !c.Missing && bytes.Equal(cur, c.Original):
		return resolvOriginal, nil
	case halfOurs(cur, c):
		return resolvOurs, nil
	}
	return resolvForeign, nil
}

// halfOurs reports whether cur is our file, or a state that only our own
// writing (or an interruption of it) could have left: empty, a prefix of
// ours, the original being overwritten by ours or ours by the original, or
// a file whose only nameservers are our forwarder (which is gone once the
// daemon is).
func halfOurs(cur []byte, c change) bool {
	switch {
	case len(cur) == 0, isOurResolvConf(cur), bytes.HasPrefix(c.Written, cur) && len(c.Written) > 0:
		return true
	case len(c.Written) > 0 && (overwriting(cur, c.Written, c.Original) || overwriting(cur, c.Original, c.Written)):
		return true
	}
	ours := parseResolvConf(c.Written).nameservers
	names := parseResolvConf(cur).nameservers
	return len(ours) > 0 && len(names) > 0 && !slices.ContainsFunc(names, func(a netip.Addr) bool { return !slices.Contains(ours, a) })
}

// overwriting reports whether cur is older being overwritten in place by
// newer and stopped part way: newer's first k bytes followed by older's
// bytes from k on, or, past older's end, newer's first k bytes alone.
func overwriting(cur, newer, older []byte) bool {
	k := commonPrefix(cur, newer)
	if len(cur) == len(older) && len(cur)-commonSuffix(cur, older) <= k {
		return true
	}
	return len(cur) > len(older) && k == len(cur)
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func commonSuffix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// restoreResolvConf undoes a recorded kindResolvConf change: the original
// comes back byte for byte (as a symlink if it was one) when the file is
// ours or half-written by us, and it is a no-op when the original is already
// there, so running it twice (after a crash part way) is safe. A file
// another program wrote since is left alone (left is true).
func restoreResolvConf(c change) (left bool, err error) {
	st, err := judgeResolvConf(c)
	if err != nil {
		return false, err
	}
	switch st {
	case resolvForeign:
		return true, nil
	case resolvOriginal:
		removeStaleTemps(c)
		return false, nil
	}
	if err := putBackResolvConf(c); err != nil {
		return false, err
	}
	removeStaleTemps(c)
	fault.Point("dns-restored")
	return false, nil
}

func putBackResolvConf(c change) error {
	switch {
	case c.Missing:
		if err := os.Remove(c.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		atomicfile.SyncDir(filepath.Dir(c.Path))
		return nil
	case c.Symlink != "":
		tmp := filepath.Join(filepath.Dir(c.Path), ".resolv.conf.runos-link")
		_ = os.Remove(tmp)
		if err := os.Symlink(c.Symlink, tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, c.Path); err != nil {
			_ = os.Remove(tmp)
			if errors.Is(err, syscall.EBUSY) {
				// A bind mount cannot become a symlink: put the content back.
				return writeFileInPlace(c.Path, c.Original)
			}
			return err
		}
		atomicfile.SyncDir(filepath.Dir(c.Path))
		return nil
	}
	_, err := writeResolvConf(c.Path, c.Original, c.Perm)
	return err
}

// removeStaleTemps removes what a rename-based write that died before its
// rename left next to the file: temporary files holding ours or the
// original, nothing else.
func removeStaleTemps(c change) {
	for _, p := range atomicfile.StaleTemps(c.Path) {
		b, err := os.ReadFile(p)
		if err == nil && (isOurResolvConf(b) || bytes.Equal(b, c.Written) || bytes.Equal(b, c.Original)) {
			_ = os.Remove(p)
		}
	}
}

// undoResolvConf is Cleanup's undoer for kindResolvConf.
func undoResolvConf(c change) error {
	left, err := restoreResolvConf(c)
	if left {
		return fmt.Errorf("%s: %w", c.Path, errLeftForeign)
	}
	return err
}
