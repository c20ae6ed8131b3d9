package platform

// DefaultSocketPath is the daemon's local API socket.
const DefaultSocketPath = "/run/runos/vpnd.sock"

// DefaultStateDir is the daemon's state directory (0700).
func DefaultStateDir() string { return "/var/lib/runos" }
