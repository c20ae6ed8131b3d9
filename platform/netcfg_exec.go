//go:build darwin || windows

package platform

import "os/exec"

// execRunner runs a command for real.
func execRunner(argv []string) ([]byte, error) {
	return exec.Command(argv[0], argv[1:]...).CombinedOutput()
}
