//go:build darwin || windows

package hosted

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func itoa(i int) string { return strconv.Itoa(i) }

// normalizeScutil keeps what split DNS changes in scutil --dns (each
// resolver's domain and name servers), sorted: the rest (reach flags,
// interface indexes, resolver numbers) moves between two reads without
// anything being configured.
func normalizeScutil(s string) string {
	keep := regexp.MustCompile(`^\s*(domain|search domain\[\d+\]|nameserver\[\d+\])\s*:`)
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if keep.MatchString(l) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
