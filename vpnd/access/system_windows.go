package access

import (
	"fmt"
	"strings"

	"golang.org/x/sys/windows"
)

// systemWords: administrators and an elevated prompt.
var systemWords = WindowsWords

// localGroupSID is the SID of this machine's local group named group. The
// name is looked up as COMPUTER\group, in the machine's own account
// database, and must name a local group (an alias): a domain group or a
// user that happens to be called runos grants nothing.
func localGroupSID(group string) (string, error) {
	computer, err := windows.ComputerName()
	if err != nil {
		return "", fmt.Errorf("this computer's name: %w", err)
	}
	sid, domain, kind, err := windows.LookupSID("", computer+`\`+group)
	if err != nil {
		return "", fmt.Errorf("local group %s: %w", group, err)
	}
	if kind != windows.SidTypeAlias || !strings.EqualFold(domain, computer) {
		return "", fmt.Errorf(`%s\%s is not a local group of this computer`, domain, group)
	}
	return sid.String(), nil
}

// accountName is DOMAIN\name of a SID, "" when it names no account.
func accountName(s string) string {
	sid, err := windows.StringToSid(s)
	if err != nil {
		return ""
	}
	account, domain, _, err := sid.LookupAccount("")
	if err != nil {
		return ""
	}
	if domain == "" {
		return account
	}
	return domain + `\` + account
}
