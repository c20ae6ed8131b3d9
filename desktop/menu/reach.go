package menu

import (
	"strings"

	"github.com/runos/vpn/vpnd/localapi"
)

// reachTooltip says what the laptop routes into the cluster (issue 21),
// as runos vpn status does.
func reachTooltip(r *localapi.ClusterReach) string {
	if r == nil {
		return ""
	}
	var parts []string
	if len(r.Routed) > 0 {
		l := "Routes " + strings.Join(r.Routed, ", ")
		if r.Default {
			l += " (default cluster)"
		}
		parts = append(parts, l)
	}
	for _, sh := range r.Shadowed {
		parts = append(parts, sh.Prefix+" shadowed by "+sh.By)
	}
	if r.Mapped != "" {
		parts = append(parts, "Every internal range by name, under "+r.Mapped)
	}
	return strings.Join(parts, "\n")
}
