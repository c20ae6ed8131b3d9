package access

import (
	"os/user"
	"slices"
	"strconv"
)

// SystemPolicy is the Policy of this machine: the operator recorded in
// stateDir, group membership from the user database (Unix) or from the
// caller's token and the local group's SID (Windows, see
// system_windows.go), and this OS's words.
func SystemPolicy(stateDir string) Policy {
	return Policy{
		Operator: func() (*Operator, error) { return ReadOperator(stateDir) },
		InGroup:  inGroup,
		UserName: func(uid int) string {
			if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
				return u.Username
			}
			return ""
		},
		GroupSID:    localGroupSID,
		AccountName: accountName,
		Words:       &systemWords,
	}
}

// inGroup reports whether uid belongs to group, as its primary group (gid,
// from the kernel) or as a supplementary one (the user database).
func inGroup(uid, gid int, group string) bool {
	g, err := user.LookupGroup(group)
	if err != nil {
		return false // no such group: nobody is in it
	}
	if g.Gid == strconv.Itoa(gid) {
		return true
	}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return false
	}
	ids, err := u.GroupIds()
	return err == nil && slices.Contains(ids, g.Gid)
}
