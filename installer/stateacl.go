package installer

import (
	"slices"
	"strings"
)

// What install makes of the state directory on Windows, decided here as
// data so that it is tested on every OS (stateacl_test.go); sys_windows.go
// reads the owners and applies the steps.
//
// %ProgramData% lets every user create folders, so a plain user could
// create RunOS's state directory before install, with an ACL of their own
// and a device.key they know. Nothing of that may survive: the directory
// and everything kept in it become owned by Administrators, with a
// protected ACL of SYSTEM and Administrators only (nothing inherited from
// %ProgramData%, which grants users read access), and whatever an
// untrusted account owns is removed (a device key another user wrote is no
// secret; the daemon makes a new one).
const (
	stateDirSDDL  = "O:BAD:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"
	stateFileSDDL = "O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)"

	sidSystem         = "S-1-5-18"
	sidAdministrators = "S-1-5-32-544"
)

// aclEntry is the state directory (the first entry) or something in it.
type aclEntry struct {
	Path  string
	Dir   bool
	Owner string // the owner's SID
}

// aclStep is one thing install does: remove Path (and all under it), or
// give it the security descriptor SDDL (owner and protected DACL).
type aclStep struct {
	Path   string
	Remove bool
	SDDL   string
}

// planStateDir turns the state directory's entries (the directory first,
// then what is in it, parents before children) into steps: removals first,
// deepest first, then the directory's descriptor and each kept entry's.
// installer is the SID of the elevated user running install, whose files
// (an earlier install's, on a machine where administrators' files are
// owned by their creator) are kept.
func planStateDir(entries []aclEntry, installer string) []aclStep {
	if len(entries) == 0 {
		return nil
	}
	trusted := func(sid string) bool {
		return sid == sidSystem || sid == sidAdministrators || installer != "" && sid == installer
	}
	var removed []string
	under := func(p string) bool {
		return slices.ContainsFunc(removed, func(r string) bool { return strings.HasPrefix(p, r+`\`) || strings.HasPrefix(p, r+"/") })
	}
	var removes, sets []aclStep
	for i, e := range entries {
		switch {
		case i == 0:
			sets = append(sets, aclStep{Path: e.Path, SDDL: stateDirSDDL}) // never removed: its descriptor is reset
		case under(e.Path):
		case !trusted(e.Owner):
			removed = append(removed, e.Path)
			removes = append(removes, aclStep{Path: e.Path, Remove: true})
		case e.Dir:
			sets = append(sets, aclStep{Path: e.Path, SDDL: stateDirSDDL})
		default:
			sets = append(sets, aclStep{Path: e.Path, SDDL: stateFileSDDL})
		}
	}
	slices.Reverse(removes) // children before their parents
	return append(removes, sets...)
}
