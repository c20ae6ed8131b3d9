// Package installer puts RunOS on a machine: the VPN daemon as a system
// service (`sudo runos vpn install`, `sudo runos vpn uninstall`), through
// github.com/kardianos/service on systemd, System V init, launchd and the
// Windows service manager, and RunOS Desktop as a login item of the current
// user (`runos desktop install`, `runos desktop uninstall`).
//
// Every service definition is rendered here from one Spec (systemdUnit,
// sysvScript, launchdPlist, scmOptions) and handed to kardianos/service
// verbatim, so what each OS gets is tested on any OS. Install is a small
// transaction: each step that changes the machine registers its undo, and a
// failure undoes them all, so a failed install leaves nothing half-done and
// a failed upgrade leaves the previous version running.
package installer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/internal/version"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/store"
)

// CAFileName is where Install copies --ca-file inside the state directory,
// so that the service never depends on a file in someone's home.
const CAFileName = "control-ca.pem"

// DefaultStartTimeout is how long Install waits for the daemon to answer.
const DefaultStartTimeout = 30 * time.Second

// Options configures Install and Uninstall. The zero value is what
// `sudo runos vpn install` does; the other fields are --operator and the
// knobs for tests and side-by-side installs.
type Options struct {
	Name      string // service name; "" = DefaultName
	Binary    string // where runos is installed; "" = DefaultBinary(), or the package's runos when it runs from there
	StateDir  string // "" = platform.DefaultStateDir()
	Socket    string // "" = platform.DefaultSocketPath
	Interface string // "" = the daemon's default (wg1)
	CAFile    string // a PEM CA for control, copied into the state directory
	// Trust is --allowed-routes and --allowed-dns-domains for the daemon,
	// recorded in the state directory; empty keeps what an earlier install
	// recorded.
	Trust   Trust
	LogFile string // the daemon's output under System V and launchd; "" = the OS default
	// Operator is the user who may steer the daemon besides root; "" is
	// the user who ran sudo (SUDO_USER; on Windows the user who elevated).
	Operator string
	// Purge (Uninstall) also removes the state directory with the device
	// key, and the service's log.
	Purge bool

	Getenv       func(string) string // nil = os.Getenv
	Progress     io.Writer           // one line per step; nil = discard
	StartTimeout time.Duration       // 0 = DefaultStartTimeout

	host *host // the machine; nil = the real one (tests inject theirs)
}

// Result is what Install did (the --json form of runos vpn install).
type Result struct {
	Service    string `json:"service"`
	Platform   string `json:"platform"`   // the service manager
	Definition string `json:"definition"` // the unit, script or plist ("" on Windows)
	Binary     string `json:"binary"`
	StateDir   string `json:"stateDir"`
	Socket     string `json:"socket"`
	Operator   string `json:"operator,omitempty"`
	Trust      Trust  `json:"trust,omitzero"` // what the daemon was told to accept besides its defaults
	Upgraded   bool   `json:"upgraded"`       // it was installed before
	Version    string `json:"version"`        // the daemon's, as it answered
	Log        string `json:"log,omitempty"`
}

// UninstallResult is what Uninstall did.
type UninstallResult struct {
	Service  string `json:"service"`
	Platform string `json:"platform"`
	Removed  bool   `json:"removed"` // a service was installed and is gone
	Purged   bool   `json:"purged"`
	// DeviceKey is the device key left in place ("" when purged or none).
	DeviceKey string `json:"deviceKey,omitempty"`
}

// NotAdminError is the refusal to install or uninstall without root (or an
// elevated prompt on Windows), before anything is touched.
type NotAdminError struct{ Command string }

func (e NotAdminError) Error() string { return adminHint(e.Command) }

// host is everything Install and Uninstall touch besides files under the
// paths they are given.
type host struct {
	admin      func() bool
	executable func() (string, error)
	invoking   func(getenv func(string) string) string
	lookupUser func(name string) (access.Operator, error)
	manager    func(Spec) (manager, error)
	version    func(ctx context.Context, socket string) (*localapi.Version, error)
	cleanup    func(ctx context.Context, cfg vpnd.Config) error
	rwPaths    func() []string
	companions []companion // files runos needs beside it (wintun.dll on Windows)
	poll       time.Duration
}

func realHost() *host {
	return &host{
		admin: isAdmin,
		executable: func() (string, error) {
			p, err := os.Executable()
			if err != nil {
				return "", err
			}
			return filepath.EvalSymlinks(p)
		},
		invoking:   invokingUser,
		lookupUser: lookupOperator,
		manager:    newManager,
		version: func(ctx context.Context, socket string) (*localapi.Version, error) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			v, err := localapi.NewClient(socket).Version(ctx)
			if err != nil {
				return nil, err // a *Version only when the daemon answered
			}
			return v, nil
		},
		cleanup:    vpnd.Cleanup,
		rwPaths:    readWritePaths,
		companions: companionFiles(),
		poll:       100 * time.Millisecond,
	}
}

func (o *Options) fill() {
	if o.host == nil {
		o.host = realHost()
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Binary == "" {
		o.Binary = DefaultBinary()
		if exe, err := o.host.executable(); err == nil && packagedBinary != "" && exe == packagedBinary {
			o.Binary = exe
		}
	}
	if o.StateDir == "" {
		o.StateDir = platform.DefaultStateDir()
	}
	if o.Socket == "" {
		o.Socket = platform.DefaultSocketPath
	}
	if o.LogFile == "" {
		o.LogFile = defaultLogFile(o.Name)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
}

func (o *Options) spec() Spec {
	s := Spec{
		Name: o.Name, DisplayName: displayName, Description: description,
		Binary: o.Binary, StateDir: o.StateDir, Socket: o.Socket, Interface: o.Interface,
		LogFile: o.LogFile, PIDFile: defaultPIDFile(o.Name),
		ReadWritePaths: o.host.rwPaths(),
	}
	ca := filepath.Join(o.StateDir, CAFileName)
	if o.CAFile != "" {
		s.CAFile = ca
	} else if _, err := os.Stat(ca); err == nil {
		s.CAFile = ca // installed before: an upgrade keeps trusting it
	}
	s.Trust = o.Trust
	if o.Trust.empty() {
		s.Trust, _ = readTrust(o.StateDir) // unreadable: the daemon's defaults, as before it was recorded
	}
	return s
}

func (o *Options) step(format string, args ...any) { fmt.Fprintf(o.Progress, format+"\n", args...) }

// Install installs or upgrades the service and starts it; it returns once
// the daemon answers on its socket. Each step that changes the machine
// registers its undo first, so that a failure rolls the whole install back.
func Install(ctx context.Context, o Options) (*Result, error) {
	o.fill()
	p, err := planInstall(ctx, &o)
	if err != nil {
		return nil, err
	}
	var t txn
	fail := func(err error) (*Result, error) {
		if uerr := t.rollback(); uerr != nil {
			return nil, fmt.Errorf("%w (and undoing the install: %v)", err, uerr)
		}
		return nil, err
	}
	if err := p.stopForUpgrade(ctx, &t); err != nil {
		return fail(err)
	}
	placed, err := p.placePrograms(&t)
	if err != nil {
		return fail(err)
	}
	if err := p.prepareState(&t); err != nil {
		return fail(err)
	}
	if err := p.register(&t); err != nil {
		return fail(err)
	}
	v, err := p.start(ctx, &t)
	if err != nil {
		return fail(err)
	}
	for _, pl := range placed {
		pl.commit()
	}
	p.res.Version = v.Version
	if v.Version != version.Version || v.Commit != version.Commit {
		o.step("warning: the daemon answers as %s (commit %s), not this build's %s (commit %s)", v.Version, v.Commit, version.Version, version.Commit)
	}
	return p.res, nil
}

// Uninstall stops and removes the service, undoes the daemon's DNS and
// tunnel changes, and keeps the device key unless Options.Purge. Running
// it where nothing is installed only cleans up.
func Uninstall(ctx context.Context, o Options) (*UninstallResult, error) {
	o.fill()
	h := o.host
	if !h.admin() {
		return nil, NotAdminError{"vpn uninstall"}
	}
	spec := o.spec()
	m, err := h.manager(spec)
	if err != nil {
		return nil, fmt.Errorf("uninstall: %w", err)
	}
	res := &UninstallResult{Service: spec.Name, Platform: m.Platform()}
	installed, err := m.Installed()
	if err != nil {
		return nil, fmt.Errorf("uninstall: is %s installed? %w", spec.Name, err)
	}
	if installed {
		o.step("Stopping %s…", spec.Name)
		if err := stopAndWait(ctx, m, h, spec.Socket, o.StartTimeout); err != nil {
			return nil, fmt.Errorf("uninstall: %w", err)
		}
		o.step("Removing the service %s (%s)", spec.Name, m.Platform())
		if err := m.Uninstall(); err != nil {
			return nil, fmt.Errorf("uninstall: remove %s from %s: %w", spec.Name, m.Platform(), err)
		}
		res.Removed = true
	} else {
		o.step("The service %s is not installed (%s)", spec.Name, m.Platform())
	}
	if v, _ := h.version(ctx, spec.Socket); v != nil {
		return res, fmt.Errorf("uninstall: a daemon the service did not start still answers on %s: stop it, then run this again", spec.Socket)
	}
	if _, err := os.Stat(spec.StateDir); err == nil {
		o.step("Undoing the daemon's DNS and tunnel changes")
		log := slog.New(slog.NewTextHandler(o.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
		cfg := vpnd.Config{StateDir: spec.StateDir, Socket: spec.Socket, Interface: spec.Interface, Logger: log, Cleanup: dnsplit.Cleanup}
		if err := h.cleanup(ctx, cfg); err != nil {
			return res, fmt.Errorf("uninstall: clean-up: %w", err)
		}
	}
	removeSocket(spec.Socket)
	if o.Purge {
		o.step("Removing %s (the device key, prefs and operator record)", spec.StateDir)
		if err := os.RemoveAll(spec.StateDir); err != nil {
			return res, fmt.Errorf("uninstall: %w", err)
		}
		if spec.LogFile != "" {
			_ = os.Remove(spec.LogFile)
		}
		res.Purged = true
	} else if k := filepath.Join(spec.StateDir, store.KeyFile); fileExists(k) {
		res.DeviceKey = k
	}
	return res, nil
}

// stopAndWait stops the service and waits until the daemon no longer
// answers. A stop that reports an error but leaves no daemon answering is
// a stop (launchd and the SCM complain about a service that was not
// running).
func stopAndWait(ctx context.Context, m manager, h *host, socket string, timeout time.Duration) error {
	serr := m.Stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if v, _ := h.version(ctx, socket); v == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if serr != nil {
				return fmt.Errorf("stop the service: %w", serr)
			}
			return fmt.Errorf("the daemon still answers on %s %s after the service was stopped", socket, timeout)
		case <-time.After(h.poll):
		}
	}
}

func startAndWait(ctx context.Context, m manager, h *host, socket string, timeout time.Duration) error {
	if err := m.Start(); err != nil {
		return err
	}
	_, err := waitAnswer(ctx, h, socket, timeout)
	return err
}

// waitAnswer waits until the daemon answers on socket, and says which
// version it is.
func waitAnswer(ctx context.Context, h *host, socket string, timeout time.Duration) (*localapi.Version, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		v, err := h.version(ctx, socket)
		if err == nil {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(h.poll):
		}
	}
}

// txn collects the undo of every step taken; rollback runs them newest first.
type txn struct{ undo []func() error }

func (t *txn) onFail(f func() error) { t.undo = append(t.undo, f) }

func (t *txn) rollback() error {
	var errs []error
	for i := len(t.undo) - 1; i >= 0; i-- {
		if err := t.undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// replaceFile runs write, which replaces path, and returns how to put back
// what was there before (or remove it if nothing was).
func replaceFile(path string, write func(dst string) error) (undo func() error, err error) {
	prev, rerr := os.ReadFile(path)
	had := rerr == nil
	if err := write(path); err != nil {
		return nil, err
	}
	return func() error {
		if !had {
			return os.Remove(path)
		}
		return store.WriteFile(path, prev)
	}, nil
}

// removeSocket removes a socket file nothing serves any more (a daemon
// killed with -9 leaves it) and its directory if that is the daemon's own.
func removeSocket(socket string) {
	if fi, err := os.Lstat(socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(socket)
	}
	if d := filepath.Dir(socket); filepath.Base(d) == "runos" {
		_ = os.Remove(d) // only when empty
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// logHint says where the daemon's output goes.
func logHint(platform string, s Spec) string {
	switch platform {
	case PlatformSystemd:
		return "journalctl -u " + s.Name
	case PlatformWindows:
		return "the Windows event log (Application, source " + s.Name + ")"
	}
	return s.LogFile
}
