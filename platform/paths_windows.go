package platform

import (
	"path/filepath"

	"golang.org/x/sys/windows"
)

// DefaultSocketPath is the daemon's local API named pipe.
const DefaultSocketPath = `\\.\pipe\runos-vpnd`

// DefaultStateDir is the daemon's state directory: %ProgramData%\RunOS,
// from the known folder (a machine may keep ProgramData on another drive),
// C:\ProgramData only when the shell cannot say.
func DefaultStateDir() string {
	root, err := windows.KnownFolderPath(windows.FOLDERID_ProgramData, 0)
	if err != nil || root == "" {
		root = `C:\ProgramData`
	}
	return filepath.Join(root, "RunOS")
}
