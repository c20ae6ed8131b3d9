package installer

import (
	"fmt"
	"path/filepath"
)

// runKeyItem is Windows's way: the program in the user's own programs
// folder (%LOCALAPPDATA%\Programs\RunOS, no elevation needed) and a value
// in the user's Run key that starts it with --at-login at every sign-in.
type runKeyItem struct{}

// RunValueName is the name of RunOS Desktop's value in the Run key.
const RunValueName = desktopApp

func (runKeyItem) programPath(e *desktopEnv) string {
	base := e.getenv("LOCALAPPDATA")
	if base == "" {
		base = filepath.Join(e.home, "AppData", "Local")
	}
	return filepath.Join(base, "Programs", "RunOS", desktopEntry+".exe")
}

func (runKeyItem) program() string { return desktopEntry + ".exe" }

// runValue is the Run key's command line: the program quoted (its path has
// spaces more often than not), then --at-login.
func runValue(program string) string { return `"` + program + `" ` + atLoginFlag }

func (r runKeyItem) install(e *desktopEnv, o *DesktopOptions, from string) (*DesktopResult, error) {
	prog := r.programPath(e)
	o.step("Installing %s", prog)
	placed, err := e.copyBin(from, prog)
	if err != nil {
		return nil, err
	}
	placed.commit() // an older copy still running stays as .previous until the next install
	o.step(`Starting it at sign-in (HKCU\%s, value %q)`, runKeyPath, RunValueName)
	if err := e.runKey.Set(RunValueName, runValue(prog)); err != nil {
		return nil, fmt.Errorf("desktop install: the Run key: %w", err)
	}
	return &DesktopResult{Program: prog, LoginItem: `HKCU\` + runKeyPath + `\` + RunValueName}, nil
}

func (r runKeyItem) uninstall(e *desktopEnv, o *DesktopOptions) ([]string, error) {
	var removed []string
	if _, ok, err := e.runKey.Get(RunValueName); err == nil && ok {
		if err := e.runKey.Delete(RunValueName); err != nil {
			return nil, fmt.Errorf("desktop uninstall: the Run key: %w", err)
		}
		removed = append(removed, `HKCU\`+runKeyPath+`\`+RunValueName)
	}
	o.step("Removing %s", r.programPath(e))
	files, err := removeAll(r.programPath(e), r.programPath(e)+".previous")
	if err != nil {
		err = fmt.Errorf("desktop uninstall: %w (quit RunOS Desktop first if it is running)", err)
	}
	return append(removed, files...), err
}

// runKeyPath is the Run key under HKEY_CURRENT_USER.
const runKeyPath = `Software\Microsoft\Windows\CurrentVersion\Run`

var _ loginItem = runKeyItem{}
