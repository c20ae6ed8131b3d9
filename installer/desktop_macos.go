package installer

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/runos/vpn/internal/version"
)

// appBundleItem is macOS's way: RunOS Desktop.app in /Applications (a
// menu-bar app: LSUIElement, no Dock icon) and a LaunchAgent in
// ~/Library/LaunchAgents that runs it with --at-login when the user logs
// in. Loading the agent with launchctl starts it at once too.
type appBundleItem struct{}

type bundlePaths struct{ bundle, program, info, agent string }

func (appBundleItem) paths(e *desktopEnv, o *DesktopOptions) bundlePaths {
	b := filepath.Join(o.Applications, desktopApp+".app")
	return bundlePaths{
		bundle:  b,
		program: filepath.Join(b, "Contents", "MacOS", desktopEntry),
		info:    filepath.Join(b, "Contents", "Info.plist"),
		agent:   filepath.Join(e.home, "Library", "LaunchAgents", desktopID+".plist"),
	}
}

func (appBundleItem) program() string { return desktopEntry }

func (a appBundleItem) install(e *desktopEnv, o *DesktopOptions, from string) (*DesktopResult, error) {
	p := a.paths(e, o)
	// The bundle is built next to its place and renamed into it, so a
	// half-copied app never shows in /Applications. It is a directory, so
	// this is no job for atomicfile, which replaces single files.
	tmp, err := os.MkdirTemp(o.Applications, "."+desktopApp+".app.new*")
	if err != nil {
		return nil, fmt.Errorf("desktop install: cannot write %s (%v): run it as an administrator user, or give --applications ~/Applications", o.Applications, err)
	}
	defer os.RemoveAll(tmp)
	o.step("Installing %s", p.bundle)
	if err := writeFile(filepath.Join(tmp, "Contents", "Info.plist"), []byte(infoPlist(version.Version)), 0o644); err != nil {
		return nil, err
	}
	placed, err := e.copyBin(from, filepath.Join(tmp, "Contents", "MacOS", desktopEntry))
	if err != nil {
		return nil, err
	}
	placed.commit()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	// Unload the agent of an earlier install before its app goes.
	domain := "gui/" + strconv.Itoa(e.uid)
	a.bootout(e, domain)
	if _, err := removeAll(p.bundle); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, p.bundle); err != nil {
		return nil, fmt.Errorf("desktop install: %w", err)
	}
	o.step("Starting it at login (%s)", p.agent)
	if err := writeFile(p.agent, []byte(launchAgentPlist(p.program)), 0o644); err != nil {
		return nil, err
	}
	res := &DesktopResult{Program: p.program, LoginItem: p.agent}
	if out, err := e.run([]string{"/bin/launchctl", "bootstrap", domain, p.agent}); err != nil {
		e.onError("launchctl bootstrap %s %s: %v %s: it starts at your next login", domain, p.agent, err, strings.TrimSpace(string(out)))
	} else {
		res.Started = true
	}
	return res, nil
}

func (a appBundleItem) uninstall(e *desktopEnv, o *DesktopOptions) ([]string, error) {
	p := a.paths(e, o)
	o.step("Stopping %s and removing its LaunchAgent and app", desktopApp)
	a.bootout(e, "gui/"+strconv.Itoa(e.uid))
	return removeAll(p.agent, p.bundle)
}

// bootout unloads the agent (and so quits the app it started); an agent
// that is not loaded is fine.
func (appBundleItem) bootout(e *desktopEnv, domain string) {
	_, _ = e.run([]string{"/bin/launchctl", "bootout", domain + "/" + desktopID})
}

// infoPlist is the bundle's Info.plist. CFBundleShortVersionString takes
// numbers only, so a build without a release version says 0.0.0.
func infoPlist(v string) string {
	short := strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(short, "-+"); i >= 0 {
		short = short[:i]
	}
	if strings.Trim(short, "0123456789.") != "" || short == "" {
		short = "0.0.0"
	}
	return plist(
		"CFBundleDevelopmentRegion", str("en"),
		"CFBundleDisplayName", str(desktopApp),
		"CFBundleExecutable", str(desktopEntry),
		"CFBundleIdentifier", str(desktopID),
		"CFBundleInfoDictionaryVersion", str("6.0"),
		"CFBundleName", str(desktopApp),
		"CFBundlePackageType", str("APPL"),
		"CFBundleShortVersionString", str(short),
		"CFBundleVersion", str(short),
		"LSMinimumSystemVersion", str("11.0"),
		"LSUIElement", "<true/>",
		"NSHighResolutionCapable", "<true/>",
	)
}

// launchAgentPlist runs the app with --at-login in the user's GUI session.
func launchAgentPlist(program string) string {
	return plist(
		"Label", str(desktopID),
		"ProgramArguments", "<array>"+str(program)+str(atLoginFlag)+"</array>",
		"RunAtLoad", "<true/>",
		"KeepAlive", "<false/>",
		"LimitLoadToSessionType", str("Aqua"),
		"ProcessType", str("Interactive"),
	)
}

func str(s string) string { return "<string>" + xmlText(s) + "</string>" }

// plist renders a property list of one dict from key, value pairs (values
// already in XML).
func plist(kv ...string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
`)
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteString("\t<key>" + xmlText(kv[i]) + "</key>\n\t" + kv[i+1] + "\n")
	}
	b.WriteString("</dict>\n</plist>\n")
	return b.String()
}

var _ loginItem = appBundleItem{}
