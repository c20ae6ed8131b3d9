package installer

import (
	"fmt"
	"path/filepath"
	"strings"
)

// companion is a file the installed program needs beside it, which Install
// copies from beside the running program: wintun.dll on Windows, which
// wireguard-go loads from the program's folder or System32 to make the
// tunnel (see companionFiles in sys_*.go).
type companion struct {
	Name string // the file's name
	// Elsewhere are directories where the OS finds the file as well, so
	// that a copy is not needed when it is in one of them.
	Elsewhere []string
	// Get says where to get the file when it is nowhere.
	Get string
}

// wintunCompanion is Wintun's DLL for a Windows program built for goarch
// (the folder of wintun's zip that holds it is named after the
// architecture, x86 for 386), found also in system32.
func wintunCompanion(goarch, system32 string) companion {
	arch := goarch
	if arch == "386" {
		arch = "x86"
	}
	c := companion{
		Name: "wintun.dll",
		Get: `runos needs Wintun for its tunnel: download the Wintun zip from https://www.wintun.net ` +
			`(a DLL signed by WireGuard LLC), put its wintun\bin\` + arch + `\wintun.dll next to runos.exe ` +
			`and run this again (a RunOS release zip for Windows that ships wintun.dll has it there already)`,
	}
	if system32 != "" {
		c.Elsewhere = []string{system32}
	}
	return c
}

// companionCopy is one companion file to put beside the installed program.
type companionCopy struct{ from, to string }

// planCompanions decides, before anything changes, where each companion
// of the program at src comes from for the program installed at binary:
// the file beside src is copied (also over an older one from a previous
// install); without one, a copy already beside binary or one the OS finds
// elsewhere will do; otherwise the install is refused, saying where to get
// it.
func planCompanions(comps []companion, src, binary string) ([]companionCopy, error) {
	var plan []companionCopy
	for _, c := range comps {
		from := filepath.Join(filepath.Dir(src), c.Name)
		to := filepath.Join(filepath.Dir(binary), c.Name)
		if fileExists(from) {
			plan = append(plan, companionCopy{from, to})
			continue
		}
		if fileExists(to) {
			continue
		}
		found := false
		for _, d := range c.Elsewhere {
			if fileExists(filepath.Join(d, c.Name)) {
				found = true
				break
			}
		}
		if found {
			continue
		}
		where := []string{filepath.Dir(src)}
		if filepath.Dir(binary) != filepath.Dir(src) {
			where = append(where, filepath.Dir(binary))
		}
		where = append(where, c.Elsewhere...)
		return nil, fmt.Errorf("install: %s is missing (not in %s): %s", c.Name, strings.Join(where, ", nor in "), c.Get)
	}
	return plan, nil
}
