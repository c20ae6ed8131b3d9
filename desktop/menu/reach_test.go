package menu

import (
	"strings"
	"testing"

	"github.com/runos/vpn/vpnd/localapi"
)

// A connected cluster's row tells, in its tooltip, what the laptop routes
// into it, what is shadowed and by what, and the mapped range.
func TestRowTooltipReach(t *testing.T) {
	ky3 := cluster("ky3", localapi.ClusterConnected, true, true)
	ky3.Reach = &localapi.ClusterReach{Default: true, Routed: []string{"10.96.0.0/12"}, Mapped: "fd52:4f53:5600:2::/96"}
	xym := cluster("xym", localapi.ClusterConnected, true, true)
	xym.Reach = &localapi.ClusterReach{Shadowed: []localapi.ShadowedRange{{Prefix: "10.96.0.0/12", By: "ky3"}}, Mapped: "fd52:4f53:5600:3::/96"}
	s, _ := run(t, State{}, StatusEvent{status(3, localapi.SessionSignedIn, ky3, xym)})
	m := Build(s, now)
	for i, want := range [][]string{
		{"Routes 10.96.0.0/12 (default cluster)", "under fd52:4f53:5600:2::/96"},
		{"10.96.0.0/12 shadowed by ky3", "under fd52:4f53:5600:3::/96"},
	} {
		for _, w := range want {
			if !strings.Contains(m.Clusters[i].Tooltip, w) {
				t.Errorf("row %s tooltip %q lacks %q", m.Clusters[i].Title, m.Clusters[i].Tooltip, w)
			}
		}
	}
}
