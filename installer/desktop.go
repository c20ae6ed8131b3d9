package installer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/runos/vpn/internal/atomicfile"
)

// DesktopOptions configures InstallDesktop and UninstallDesktop.
type DesktopOptions struct {
	// From is the runos-desktop program to install; "" is the one next to
	// the running runos (bin/runos-desktop after `make build`).
	From string
	// Applications is where macOS gets the app bundle; "" = /Applications.
	Applications string
	Progress     io.Writer // nil = discard

	env  *desktopEnv // the user's machine; nil = the real one
	item loginItem   // the OS's kind of login item; nil = this OS's
}

// DesktopResult is what InstallDesktop did (the --json form).
type DesktopResult struct {
	Program   string `json:"program"`   // the installed program
	LoginItem string `json:"loginItem"` // what starts it at login
	Started   bool   `json:"started"`   // it runs now too (macOS: loading the agent starts it)
}

// DesktopUninstallResult is what UninstallDesktop removed.
type DesktopUninstallResult struct {
	Removed []string `json:"removed"`
}

// desktopEnv is the user's side of the machine that a login item touches,
// injected so that each OS's variant is tested on any OS.
type desktopEnv struct {
	home   string
	getenv func(string) string
	uid    int
	// sudo is set when running as root through sudo: the login item would
	// be root's, not the user's.
	sudo    bool
	exe     func() (string, error)                 // the running runos
	run     func(argv []string) ([]byte, error)    // launchctl
	runKey  RunKey                                 // Windows: HKCU\…\Run
	onError func(format string, args ...any)       // warnings that do not fail the command
	stat    func(string) (os.FileInfo, error)      // os.Stat
	copyBin func(src, dst string) (*placed, error) // placeBinary
}

// RunKey is the user's Run key in the Windows registry
// (HKCU\Software\Microsoft\Windows\CurrentVersion\Run).
type RunKey interface {
	Get(name string) (value string, ok bool, err error)
	Set(name, value string) error
	Delete(name string) error // a missing value is not an error
}

// loginItem is one OS's way to add RunOS Desktop and start it at login.
type loginItem interface {
	// program is the file name of the desktop program on this OS.
	program() string
	install(e *desktopEnv, o *DesktopOptions, from string) (*DesktopResult, error)
	uninstall(e *desktopEnv, o *DesktopOptions) ([]string, error)
}

// desktopApp names the app the way the product does.
const (
	desktopApp   = "RunOS Desktop"
	desktopID    = "com.runos.desktop"
	desktopEntry = "runos-desktop"
	atLoginFlag  = "--at-login"
)

func (o *DesktopOptions) fill() error {
	if o.env == nil {
		e, err := nativeDesktopEnv()
		if err != nil {
			return err
		}
		o.env = e
	}
	if o.item == nil {
		o.item = nativeLoginItem()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Applications == "" {
		o.Applications = "/Applications"
	}
	if o.env.stat == nil {
		o.env.stat = os.Stat
	}
	if o.env.copyBin == nil {
		o.env.copyBin = placeBinary
	}
	if o.env.onError == nil {
		o.env.onError = func(f string, a ...any) { fmt.Fprintf(o.Progress, "warning: "+f+"\n", a...) }
	}
	return nil
}

func (o *DesktopOptions) step(format string, args ...any) {
	fmt.Fprintf(o.Progress, format+"\n", args...)
}

// InstallDesktop adds RunOS Desktop for the current user and makes it start
// at login with --at-login. Installing again replaces it.
func InstallDesktop(o DesktopOptions) (*DesktopResult, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	e := o.env
	if e.sudo {
		return nil, errors.New("RunOS Desktop is installed for the user who runs it: run it as yourself, without sudo: runos desktop install")
	}
	from := o.From
	if from == "" {
		self, err := e.exe()
		if err != nil {
			return nil, fmt.Errorf("desktop install: find the running program: %w", err)
		}
		from = filepath.Join(filepath.Dir(self), o.item.program())
		if _, err := e.stat(from); err != nil {
			return nil, fmt.Errorf("RunOS Desktop is not built: there is no %s next to runos (%s). Build it with `make build` (it goes to bin/) and run bin/runos desktop install, or give its path with --from", o.item.program(), from)
		}
	}
	fi, err := e.stat(from)
	switch {
	case err != nil:
		return nil, fmt.Errorf("desktop install: --from %s: %w", from, err)
	case fi.IsDir():
		return nil, fmt.Errorf("desktop install: --from %s is a directory: give the %s program that `make build` makes", from, o.item.program())
	case fi.Mode().Perm()&0o111 == 0 && !strings.HasSuffix(from, ".exe"):
		return nil, fmt.Errorf("desktop install: %s is not executable", from)
	}
	return o.item.install(e, &o, from)
}

// UninstallDesktop removes the login item and what InstallDesktop added;
// removing what is not there is not an error.
func UninstallDesktop(o DesktopOptions) (*DesktopUninstallResult, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	if o.env.sudo {
		return nil, errors.New("RunOS Desktop was installed for your user: run it as yourself, without sudo: runos desktop uninstall")
	}
	removed, err := o.item.uninstall(o.env, &o)
	return &DesktopUninstallResult{Removed: removed}, err
}

// writeFile writes data to path (mode perm) atomically, making its directory.
func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// removeAll removes each path that exists and returns those it removed.
func removeAll(paths ...string) ([]string, error) {
	var removed []string
	var errs []error
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
