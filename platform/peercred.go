package platform

// PeerCred is the kernel-verified identity of the process at the other end
// of the daemon's local socket: what the kernel says, not what the client
// claims, so the daemon can decide who may steer it.
type PeerCred struct {
	UID int // -1 where the OS has no numeric uid (Windows)
	GID int // primary group; -1 when unknown
	PID int // 0 when the OS does not say
	// Admin is the OS's all-powerful identity: uid 0 on Unix, an elevated
	// Administrators or SYSTEM token on Windows.
	Admin bool
	// SID is the user's security identifier on Windows (S-1-5-21-…), where
	// it stands in for the uid; "" on Unix.
	SID string
}
