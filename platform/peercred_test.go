package platform

import (
	"slices"
	"testing"
)

func TestEnabledGroupSIDs(t *testing.T) {
	const mandatory, enabledByDefault = 0x1, 0x2
	got := enabledGroupSIDs([]tokenGroup{
		{"S-1-1-0", mandatory | enabledByDefault | seGroupEnabled},             // Everyone
		{"S-1-5-32-544", seGroupUseForDenyOnly},                                // Administrators, UAC filtered
		{"S-1-5-32-545", seGroupEnabled | seGroupUseForDenyOnly},               // deny-only wins
		{"S-1-5-21-1-2-3-1010", mandatory | enabledByDefault | seGroupEnabled}, // the local runos group
		{"S-1-5-21-1-2-3-1011", enabledByDefault},                              // disabled
		{"", seGroupEnabled},
	})
	if want := []string{"S-1-1-0", "S-1-5-21-1-2-3-1010"}; !slices.Equal(got, want) {
		t.Errorf("enabledGroupSIDs = %q, want %q", got, want)
	}
	if enabledGroupSIDs(nil) != nil {
		t.Error("groups from no token")
	}
}
