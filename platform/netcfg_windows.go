package platform

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/windows"
	"golang.zx2c4.com/wireguard/windows/tunnel/winipcfg"
)

// OpenTunnelNet returns the TunnelNet of the Wintun adapter named name,
// which must exist: addresses and routes through the IP Helper API
// (winipcfg) on the adapter's LUID, found from its name. Like a netsh
// change with store=active, nothing it adds survives a reboot.
//
// The name, not the LUID wireguard-go's tun.NativeTun knows, so that
// OpenTunnelNet is one call on every OS for the daemon and the gateway;
// the adapter lives as long as the caller's tun device, so its LUID does
// not change while the TunnelNet is in use.
//
// Verified here (Linux): this compiles and vets for windows/amd64 and
// windows/arm64, and the diffing and route bookkeeping it shares with
// macOS (opsNet) are unit-tested. Not verified: running it on Windows.
// winipcfgOps is kept to one IP Helper call a change for that reason.
func OpenTunnelNet(name string) (TunnelNet, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	luid, err := winipcfg.LUIDFromIndex(uint32(ifi.Index))
	if err != nil {
		return nil, fmt.Errorf("interface %s: LUID of index %d: %w", name, ifi.Index, err)
	}
	return newOpsNet(name, winipcfgOps{luid: luid}), nil
}

// winipcfgOps are Windows's netOps: single IP Helper calls on one adapter.
type winipcfgOps struct{ luid winipcfg.LUID }

func (winipcfgOps) up() error { return nil } // a Wintun adapter is up while its session runs

func (o winipcfgOps) addrs() ([]netip.Prefix, error) {
	rows, err := winipcfg.GetUnicastIPAddressTable(windows.AF_UNSPEC)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, r := range rows {
		if r.InterfaceLUID == o.luid {
			out = append(out, netip.PrefixFrom(r.Address.Addr().WithZone(""), int(r.OnLinkPrefixLength)))
		}
	}
	return out, nil
}

func (o winipcfgOps) addAddress(p netip.Prefix) error { return o.luid.AddIPAddress(p) }

func (o winipcfgOps) delAddress(p netip.Prefix) error { return gone(o.luid.DeleteIPAddress(p)) }

// Routes are on-link (no gateway: the unspecified next hop), with metric 0
// so that the adapter's interface metric alone ranks them.
func (o winipcfgOps) addRoute(p netip.Prefix) error { return o.luid.AddRoute(p, onLink(p), 0) }

func (o winipcfgOps) delRoute(p netip.Prefix) error { return gone(o.luid.DeleteRoute(p, onLink(p))) }

func onLink(p netip.Prefix) netip.Addr {
	if p.Addr().Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// gone marks ERROR_NOT_FOUND ("Element not found."), which the IP Helper
// deletes return for an address or route the adapter no longer has, as
// errGone.
func gone(err error) error {
	if errors.Is(err, windows.ERROR_NOT_FOUND) {
		return fmt.Errorf("%w: %w", errGone, err)
	}
	return err
}

// DeleteInterface removes a left-over interface; a missing one is not an
// error. Wintun removes an adapter when the process that created it exits
// (it is a software device bound to its handle), so a crashed daemon leaves
// none behind.
func DeleteInterface(name string) error { return nil }

// InterfaceExists reports whether an interface named name exists.
func InterfaceExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}
