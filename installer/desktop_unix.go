//go:build !windows

package installer

import (
	"os"
	"os/exec"
	"path/filepath"
)

func unixDesktopEnv() (*desktopEnv, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, err
	}
	return &desktopEnv{
		home:   home,
		getenv: os.Getenv,
		uid:    os.Getuid(),
		sudo:   os.Geteuid() == 0 && os.Getenv("SUDO_USER") != "",
		exe: func() (string, error) {
			p, err := os.Executable()
			if err != nil {
				return "", err
			}
			return filepath.EvalSymlinks(p)
		},
		run: func(argv []string) ([]byte, error) { return exec.Command(argv[0], argv[1:]...).CombinedOutput() },
	}, nil
}
