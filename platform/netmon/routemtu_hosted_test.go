//go:build darwin || windows

package netmon

import (
	"net/netip"
	"slices"
	"testing"
)

// The hosted runners (.github/workflows) run this; no Linux lab can.
// Their default route's interface is the path to an outside address, so
// RouteMTU must answer with one of the default routes' MTUs, and refuse
// an address that is none.
func TestRouteMTUFollowsTheDefaultRoute(t *testing.T) {
	src, err := newSource()
	if err != nil {
		t.Fatal(err)
	}
	defer src.close()
	st, err := src.read()
	if err != nil {
		t.Fatal(err)
	}
	var mtus []int
	for _, r := range st.Default {
		if r.Gateway.Is4() {
			mtus = append(mtus, r.MTU)
		}
	}
	if len(mtus) == 0 {
		t.Skipf("no IPv4 default route on this runner: %+v", st.Default)
	}
	got, err := RouteMTU(netip.MustParseAddr("192.0.2.1")) // TEST-NET-1: routed by the default route
	if err != nil {
		t.Fatalf("RouteMTU(192.0.2.1): %v", err)
	}
	if !slices.Contains(mtus, got) {
		t.Errorf("RouteMTU(192.0.2.1) = %d, want one of the default routes' MTUs %v", got, mtus)
	}
	if _, err := RouteMTU(netip.Addr{}); err == nil {
		t.Error("RouteMTU of no address: no error")
	}
}
