package installer

import (
	"path/filepath"
	"strings"

	"github.com/runos/vpn/desktop/icons"
	"github.com/runos/vpn/desktop/menu"
)

// xdgItem is the Linux desktops' way (freedesktop.org): the program in
// ~/.local/bin, an application entry and icon in $XDG_DATA_HOME, and an
// autostart entry in $XDG_CONFIG_HOME/autostart that runs it with
// --at-login.
type xdgItem struct{}

type xdgPaths struct{ program, app, icon, autostart string }

func (xdgItem) paths(e *desktopEnv) xdgPaths {
	data := e.getenv("XDG_DATA_HOME")
	if !filepath.IsAbs(data) {
		data = filepath.Join(e.home, ".local", "share")
	}
	config := e.getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(config) {
		config = filepath.Join(e.home, ".config")
	}
	return xdgPaths{
		program:   filepath.Join(e.home, ".local", "bin", desktopEntry),
		app:       filepath.Join(data, "applications", desktopEntry+".desktop"),
		icon:      filepath.Join(data, "icons", "hicolor", "32x32", "apps", desktopEntry+".png"),
		autostart: filepath.Join(config, "autostart", desktopEntry+".desktop"),
	}
}

func (xdgItem) program() string { return desktopEntry }

func (x xdgItem) install(e *desktopEnv, o *DesktopOptions, from string) (*DesktopResult, error) {
	p := x.paths(e)
	o.step("Installing %s", p.program)
	placed, err := e.copyBin(from, p.program)
	if err != nil {
		return nil, err
	}
	placed.commit()
	if err := writeFile(p.icon, icons.PNG(menu.IconConnected), 0o644); err != nil {
		return nil, err
	}
	o.step("Adding %s to your applications (%s)", desktopApp, p.app)
	if err := writeFile(p.app, []byte(desktopFile(p.program, false)), 0o644); err != nil {
		return nil, err
	}
	o.step("Starting it at login (%s)", p.autostart)
	if err := writeFile(p.autostart, []byte(desktopFile(p.program, true)), 0o644); err != nil {
		return nil, err
	}
	return &DesktopResult{Program: p.program, LoginItem: p.autostart}, nil
}

func (x xdgItem) uninstall(e *desktopEnv, o *DesktopOptions) ([]string, error) {
	p := x.paths(e)
	o.step("Removing %s's autostart entry, application entry, icon and program", desktopApp)
	return removeAll(p.autostart, p.app, p.icon, p.program)
}

// desktopFile is a Desktop Entry (freedesktop.org desktop-entry-spec 1.5)
// for the program; the autostart one runs it with --at-login.
func desktopFile(program string, atLogin bool) string {
	exec := desktopExecArg(program)
	if atLogin {
		exec += " " + atLoginFlag
	}
	lines := []string{
		"[Desktop Entry]",
		"Type=Application",
		"Version=1.5",
		"Name=" + desktopApp,
		"GenericName=VPN",
		"Comment=Connect to your RunOS clusters from the system tray",
		"Exec=" + exec,
		"TryExec=" + desktopEscape(program),
		"Icon=" + desktopEntry,
		"Terminal=false",
		"Categories=Network;",
		"StartupNotify=false",
	}
	if atLogin {
		lines = append(lines, "NoDisplay=true", "X-GNOME-Autostart-enabled=true")
	}
	return strings.Join(lines, "\n") + "\n"
}

// desktopExecArg quotes one argument of an Exec key: reserved characters
// need double quotes (with ", `, $ and \ escaped inside), % is doubled
// (field codes), and the value as a whole is a string whose backslashes
// are escaped again.
func desktopExecArg(s string) string {
	s = strings.ReplaceAll(s, "%", "%%")
	if strings.ContainsAny(s, " \t\n\"'\\><~|&;$*?#()`") {
		s = `"` + strings.NewReplacer(`"`, `\"`, "`", "\\`", "$", `\$`, `\`, `\\`).Replace(s) + `"`
	}
	return desktopEscape(s)
}

// desktopEscape escapes a string value of a desktop entry.
func desktopEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(s)
}

var _ loginItem = xdgItem{}
