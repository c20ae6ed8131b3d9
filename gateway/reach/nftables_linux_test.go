package reach

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// An interval set's elements: a start, and the end marked after the last
// address; touching ranges make one interval, and a range up to the top
// address has no end.
func TestIntervals(t *testing.T) {
	for in, want := range map[string]string{
		"10.10.0.0/24 10.96.0.0/12":   "10.10.0.0 10.10.1.0/end 10.96.0.0 10.112.0.0/end",
		"10.0.0.0/25 10.0.0.128/25":   "10.0.0.0 10.0.1.0/end",
		"10.0.0.0/8 255.255.255.0/24": "10.0.0.0 11.0.0.0/end 255.255.255.0",
		"fd52:4f53:5600:3::a0a:0/120": "fd52:4f53:5600:3::a0a:0 fd52:4f53:5600:3::a0a:100/end",
		"10.1.2.3/32":                 "10.1.2.3 10.1.2.4/end",
	} {
		var ps []netip.Prefix
		for _, f := range strings.Fields(in) {
			ps = append(ps, netip.MustParsePrefix(f))
		}
		var got []string
		for _, e := range intervals(ps) {
			a, _ := netip.AddrFromSlice(e.Key)
			s := a.String()
			if e.IntervalEnd {
				s += "/end"
			}
			got = append(got, s)
		}
		if g := fmt.Sprint(got); g != "["+want+"]" {
			t.Errorf("intervals(%s) = %s, want [%s]", in, g, want)
		}
	}
}
