package installer

import (
	"fmt"
	"os"
	"path/filepath"
)

// ServiceStatus is what `runos vpn doctor` and `runos vpn bugreport` learn
// of the daemon's service without changing anything (no admin rights
// needed).
type ServiceStatus struct {
	Service    string `json:"service"`
	Platform   string `json:"platform"`
	Installed  bool   `json:"installed"`
	Enabled    bool   `json:"enabled"`              // starts at boot
	Definition string `json:"definition,omitempty"` // the unit, script or plist file
	Text       string `json:"-"`                    // its content, when readable
}

// Status reports whether the service is installed and starts at boot.
func Status(o Options) (*ServiceStatus, error) {
	o.fill()
	spec := o.spec()
	m, err := o.host.manager(spec)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", spec.Name, err)
	}
	st := &ServiceStatus{Service: spec.Name, Platform: m.Platform(), Definition: m.Definition()}
	if st.Installed, err = m.Installed(); err != nil {
		return st, fmt.Errorf("is %s installed? %w", spec.Name, err)
	}
	if !st.Installed {
		return st, nil
	}
	if st.Definition != "" {
		if b, err := os.ReadFile(st.Definition); err == nil {
			st.Text = string(b)
		}
	}
	st.Enabled = enabledAtBoot(st.Platform, spec.Name, "/etc")
	return st, nil
}

// enabledAtBoot says whether the service manager starts name at boot:
// systemd's wants link, System V's start links; launchd and the Windows
// service manager start what RunOS installs (RunAtLoad, automatic start)
// for as long as it is installed.
func enabledAtBoot(platform, name, etc string) bool {
	var glob string
	switch platform {
	case PlatformSystemd:
		glob = filepath.Join(etc, "systemd", "system", "*.wants", name+".service")
	case PlatformSysV:
		glob = filepath.Join(etc, "rc[2-5].d", "S[0-9][0-9]"+name)
	default:
		return true
	}
	m, _ := filepath.Glob(glob)
	return len(m) > 0
}
