package installer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kardianos/service"
)

// The kardianos/service backends (their Platform names) RunOS installs on.
const (
	PlatformSystemd = "linux-systemd"
	PlatformSysV    = "unix-systemv"
	PlatformLaunchd = "darwin-launchd"
	PlatformWindows = "windows-service"
)

// serviceConfig is what kardianos/service is given for the backend named
// platform: the unit, script or plist rendered from s (kardianos renders
// them through its template engine, which leaves text without {{ as is),
// or the Windows service settings.
func serviceConfig(platform string, s Spec) (*service.Config, error) {
	if err := s.checkPaths(); err != nil {
		return nil, err
	}
	c := &service.Config{
		Name:        s.Name,
		DisplayName: s.DisplayName,
		Description: s.Description,
		Executable:  s.Binary,
		Arguments:   s.DaemonArgs(),
	}
	switch platform {
	case PlatformSystemd:
		c.Option = service.KeyValue{"SystemdScript": systemdUnit(s)}
	case PlatformSysV:
		c.Option = service.KeyValue{"SysvScript": sysvScript(s)}
	case PlatformLaunchd:
		c.Option = service.KeyValue{"LaunchdConfig": launchdPlist(s), "RunAtLoad": true, "KeepAlive": true}
	case PlatformWindows:
		c.Option = scmOptions()
	default:
		return nil, fmt.Errorf("this machine's service manager is %s: runos vpn install supports systemd, System V init, launchd and Windows services; run `runos vpnd` from your init system by hand", platform)
	}
	return c, nil
}

// definitionPath is where the backend keeps the service's definition
// ("" on Windows, whose services live in the SCM's database).
func definitionPath(platform, name string) string {
	switch platform {
	case PlatformSystemd:
		return "/etc/systemd/system/" + name + ".service"
	case PlatformSysV:
		return "/etc/init.d/" + name
	case PlatformLaunchd:
		return "/Library/LaunchDaemons/" + name + ".plist"
	}
	return ""
}

// manager is the machine's service manager as Install and Uninstall use
// it; kardianos/service is behind the real one.
type manager interface {
	Platform() string
	Definition() string // where the definition is ("" when not a file)
	Installed() (bool, error)
	Install() error
	Uninstall() error
	Start() error
	Stop() error
}

// newManager is the real manager for s on this machine's service manager.
func newManager(s Spec) (manager, error) {
	sys := service.ChosenSystem()
	if sys == nil {
		return nil, errors.New("no service manager found on this machine")
	}
	platform := sys.String()
	cfg, err := serviceConfig(platform, s)
	if err != nil {
		return nil, err
	}
	svc, err := sys.New(noProgram{}, cfg)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", s.Name, err)
	}
	return &kardianosManager{svc: svc, platform: platform, name: s.Name, def: definitionPath(platform, s.Name), etc: "/etc"}, nil
}

// noProgram is the service.Interface of a process that only installs and
// controls the service, never runs it.
type noProgram struct{}

func (noProgram) Start(service.Service) error { return nil }
func (noProgram) Stop(service.Service) error  { return nil }

type kardianosManager struct {
	svc      service.Service
	platform string
	name     string
	def      string
	etc      string // System V's rc directories are under it
}

func (m *kardianosManager) Platform() string   { return m.platform }
func (m *kardianosManager) Definition() string { return m.def }

func (m *kardianosManager) Installed() (bool, error) {
	if m.def != "" {
		_, err := os.Stat(m.def)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	_, err := m.svc.Status()
	if errors.Is(err, service.ErrNotInstalled) {
		return false, nil
	}
	return err == nil, err
}

func (m *kardianosManager) Install() error {
	if err := m.svc.Install(); err != nil {
		return err
	}
	return afterInstall(m.platform, m.name)
}

func (m *kardianosManager) Uninstall() error {
	if err := m.svc.Uninstall(); err != nil {
		return err
	}
	if m.platform == PlatformSysV {
		// kardianos/service links the script into the runlevels but
		// leaves the links behind on uninstall.
		return removeSysVLinks(m.etc, m.name)
	}
	return nil
}

func (m *kardianosManager) Start() error { return m.svc.Start() }
func (m *kardianosManager) Stop() error  { return m.svc.Stop() }

// removeSysVLinks removes the runlevel links kardianos/service made for
// name (S50name in rc2–5.d, K02name in rc0, rc1 and rc6.d), and only those.
func removeSysVLinks(etc, name string) error {
	var errs []error
	for _, l := range []string{"S50", "K02"} {
		links, _ := filepath.Glob(filepath.Join(etc, "rc[0-6].d", l+name))
		for _, p := range links {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
