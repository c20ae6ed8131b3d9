//go:build darwin || windows

package netmon

import (
	"net"
	"net/netip"
)

// stdAddrs reads the global unicast addresses of the links that are up
// through the standard library, for the systems whose route messages do
// not carry them (macOS, Windows): st.Addrs, and the links by index for the
// default routes read next.
func stdAddrs(st *State) (map[int]net.Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	byIndex := map[int]net.Interface{}
	for _, ifc := range ifs {
		byIndex[ifc.Index] = ifc
		if ifc.Flags&net.FlagUp == 0 {
			continue // a link that is down carries nothing
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				ip, ok := netip.AddrFromSlice(ipn.IP)
				if !ok || !ip.Unmap().IsGlobalUnicast() {
					continue
				}
				ones, _ := ipn.Mask.Size()
				st.Addrs = append(st.Addrs, Addr{Iface: ifc.Name, Addr: netip.PrefixFrom(ip.Unmap(), ones), MTU: ifc.MTU})
			}
		}
	}
	return byIndex, nil
}
