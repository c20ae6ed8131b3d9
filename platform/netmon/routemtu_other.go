//go:build !linux

package netmon

import (
	"errors"
	"net/netip"
)

// RouteMTU is not looked up on this OS yet: the daemon's TCP clamp falls
// back on the smallest MTU of the uplinks (State.MTU).
func RouteMTU(dst netip.Addr) (int, error) {
	return 0, errors.ErrUnsupported
}
