package installer

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/windows/registry"
)

func nativeLoginItem() loginItem { return runKeyItem{} }

func nativeDesktopEnv() (*desktopEnv, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, err
	}
	return &desktopEnv{
		home:   home,
		getenv: os.Getenv,
		uid:    -1,
		exe: func() (string, error) {
			p, err := os.Executable()
			if err != nil {
				return "", err
			}
			return filepath.EvalSymlinks(p)
		},
		run:    func(argv []string) ([]byte, error) { return exec.Command(argv[0], argv[1:]...).CombinedOutput() },
		runKey: winRunKey{},
	}, nil
}

// winRunKey is HKCU\Software\Microsoft\Windows\CurrentVersion\Run.
type winRunKey struct{}

func (winRunKey) open(access uint32) (registry.Key, error) {
	k, _, err := registry.CreateKey(registry.CURRENT_USER, runKeyPath, access)
	return k, err
}

func (r winRunKey) Get(name string) (string, bool, error) {
	k, err := r.open(registry.QUERY_VALUE)
	if err != nil {
		return "", false, err
	}
	defer k.Close()
	v, _, err := k.GetStringValue(name)
	if errors.Is(err, registry.ErrNotExist) {
		return "", false, nil
	}
	return v, err == nil, err
}

func (r winRunKey) Set(name, value string) error {
	k, err := r.open(registry.SET_VALUE)
	if err != nil {
		return err
	}
	defer k.Close()
	return k.SetStringValue(name, value)
}

func (r winRunKey) Delete(name string) error {
	k, err := r.open(registry.SET_VALUE)
	if err != nil {
		return err
	}
	defer k.Close()
	if err := k.DeleteValue(name); err != nil && !errors.Is(err, registry.ErrNotExist) {
		return err
	}
	return nil
}
