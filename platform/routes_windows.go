package platform

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/windows"
	"golang.zx2c4.com/wireguard/windows/tunnel/winipcfg"
)

// RouteTo is the interface Windows would use for dst, by the forwarding
// table's longest match (then the lowest metric); interface metrics are
// not added in. Verified here only by compiling and vetting.
func RouteTo(dst netip.Addr) (string, error) {
	rs, err := Routes()
	if err != nil {
		return "", err
	}
	r, ok := LongestMatch(rs, dst)
	if !ok {
		return "", fmt.Errorf("route to %s: none", dst)
	}
	return r.Interface, nil
}

// Routes lists the IP Helper forwarding table (IPv4 and IPv6), with each
// route's interface alias.
func Routes() ([]Route, error) {
	var out []Route
	for _, fam := range []winipcfg.AddressFamily{windows.AF_INET, windows.AF_INET6} {
		rows, err := winipcfg.GetIPForwardTable2(fam)
		if err != nil {
			return nil, fmt.Errorf("list routes: %w", err)
		}
		for i := range rows {
			name := ""
			if ifr, err := rows[i].InterfaceLUID.Interface(); err == nil {
				name = ifr.Alias()
			}
			out = append(out, Route{Prefix: rows[i].DestinationPrefix.Prefix(), Interface: name, Metric: int(rows[i].Metric)})
		}
	}
	return out, nil
}
