//go:build !windows

package secretfile

import (
	"fmt"
	"io/fs"
)

// checkMode refuses a file whose group or others may read it.
func checkMode(path string, fi fs.FileInfo) error {
	if m := fi.Mode().Perm(); m&0o044 != 0 {
		return fmt.Errorf("%s is readable by other users (mode %s), and it holds secrets: refused; chmod 600 %s", path, m, path)
	}
	return nil
}
