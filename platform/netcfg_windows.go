package platform

import (
	"errors"
	"net/netip"
)

// errTunnelNet says what issue 5 adds here: winipcfg on the Wintun adapter.
var errTunnelNet = errors.New("tunnel addresses and routes: not supported on windows yet")

type unsupportedTunnelNet struct{}

// OpenTunnelNet returns the TunnelNet of the interface named name.
func OpenTunnelNet(name string) (TunnelNet, error) { return nil, errTunnelNet }

// DeleteInterface removes a left-over interface; a missing one is not an error.
func DeleteInterface(name string) error { return nil }

// InterfaceExists reports whether an interface named name exists.
func InterfaceExists(name string) bool { return false }

func (unsupportedTunnelNet) Up() error                         { return errTunnelNet }
func (unsupportedTunnelNet) SetAddresses([]netip.Prefix) error { return errTunnelNet }
func (unsupportedTunnelNet) SetRoutes([]netip.Prefix) error    { return errTunnelNet }

var _ TunnelNet = unsupportedTunnelNet{}
