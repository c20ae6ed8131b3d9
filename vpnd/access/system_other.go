//go:build !windows

package access

import "errors"

// systemWords: root and sudo.
var systemWords = UnixWords

// localGroupSID: Unix callers have a uid, and their groups come from the
// user database (inGroup); there are no SIDs here.
func localGroupSID(string) (string, error) { return "", errors.New("no SIDs on this OS") }

func accountName(string) string { return "" }
