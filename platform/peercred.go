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
	// GroupSIDs are, on Windows, the SIDs of the groups the client's token
	// holds enabled (a deny-only group, such as Administrators in a token
	// UAC filtered, is left out): what decides membership of a local group
	// there. Windows fixes a token's groups at sign-in, so a user added to
	// a group counts as a member from their next sign-in. nil on Unix,
	// where membership comes from the user database.
	GroupSIDs []string
}

// tokenGroup is one group of a Windows token (SID_AND_ATTRIBUTES): its SID
// as a string and its SE_GROUP_* attributes. It lives here, not in the
// Windows file, so that which groups count is tested on every OS.
type tokenGroup struct {
	SID   string
	Attrs uint32
}

// The SE_GROUP_* attributes enabledGroupSIDs reads (winnt.h; the Windows
// file checks at compile time that they are golang.org/x/sys/windows's).
const (
	seGroupEnabled        = 0x00000004
	seGroupUseForDenyOnly = 0x00000010
)

// enabledGroupSIDs are the SIDs of the groups that grant access: enabled
// and not deny-only.
func enabledGroupSIDs(groups []tokenGroup) []string {
	var sids []string
	for _, g := range groups {
		if g.Attrs&seGroupEnabled != 0 && g.Attrs&seGroupUseForDenyOnly == 0 && g.SID != "" {
			sids = append(sids, g.SID)
		}
	}
	return sids
}
