//go:build darwin || windows

package hosted

import (
	"regexp"
	"strconv"
)

func itoa(i int) string { return strconv.Itoa(i) }

// normalizeScutil drops what changes between two reads of scutil --dns
// without anything being configured (the reach flags' order, interface
// indexes).
func normalizeScutil(s string) string {
	return regexp.MustCompile(`(?m)^\s*(reach|flags|if_index)\s*:.*\n`).ReplaceAllString(s, "")
}
