package platform

// DefaultSocketPath is the daemon's local API socket.
const DefaultSocketPath = "/var/run/runos/vpnd.sock"

// DefaultStateDir is the daemon's state directory (0700).
func DefaultStateDir() string { return "/Library/Application Support/RunOS" }
