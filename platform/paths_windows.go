package platform

// DefaultSocketPath is the daemon's local API named pipe.
const DefaultSocketPath = `\\.\pipe\runos-vpnd`

// DefaultStateDir is the daemon's state directory.
const DefaultStateDir = `C:\ProgramData\RunOS`
