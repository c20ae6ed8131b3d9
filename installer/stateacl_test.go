package installer

import (
	"slices"
	"testing"
)

// TestStateDirACLPlan is what install on Windows does to a state directory
// a plain user planted before it (tested here by the steps it would take;
// sys_windows.go only reads owners and applies them).
func TestStateDirACLPlan(t *testing.T) {
	const (
		user  = "S-1-5-21-1111-2222-3333-1001" // a plain user
		admin = "S-1-5-21-1111-2222-3333-500"  // the administrator running install
		dir   = `C:\ProgramData\RunOS`
	)
	got := planStateDir([]aclEntry{
		{Path: dir, Dir: true, Owner: user},
		{Path: dir + `\device.key`, Owner: user},
		{Path: dir + `\planted`, Dir: true, Owner: user},
		{Path: dir + `\planted\x`, Owner: sidSystem}, // goes with its folder
		{Path: dir + `\prefs.json`, Owner: sidSystem},
		{Path: dir + `\operator.json`, Owner: admin},
		{Path: dir + `\ca.pem`, Owner: sidAdministrators},
		{Path: dir + `\dns`, Dir: true, Owner: sidSystem},
	}, admin)
	want := []aclStep{
		{Path: dir + `\planted`, Remove: true},
		{Path: dir + `\device.key`, Remove: true},
		{Path: dir, SDDL: "O:BAD:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"},
		{Path: dir + `\prefs.json`, SDDL: "O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)"},
		{Path: dir + `\operator.json`, SDDL: "O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)"},
		{Path: dir + `\ca.pem`, SDDL: "O:BAD:P(A;;FA;;;SY)(A;;FA;;;BA)"},
		{Path: dir + `\dns`, SDDL: "O:BAD:P(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("steps:\n got  %+v\n want %+v", got, want)
	}
	// Every descriptor makes Administrators the owner and allows SYSTEM and
	// Administrators only, protected from what %ProgramData% passes down.
	for _, s := range got {
		if s.Remove {
			continue
		}
		if s.SDDL[:4] != "O:BA" || s.SDDL[4:7] != "D:P" {
			t.Errorf("%s: %s, want owner BA and a protected DACL", s.Path, s.SDDL)
		}
	}
	// A directory install made before is kept whole.
	own := planStateDir([]aclEntry{{Path: dir, Dir: true, Owner: sidAdministrators}, {Path: dir + `\device.key`, Owner: sidSystem}}, admin)
	if len(own) != 2 || own[0].Remove || own[1].Remove {
		t.Errorf("an install's own directory: %+v", own)
	}
}
