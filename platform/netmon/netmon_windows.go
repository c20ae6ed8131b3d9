package netmon

import (
	"fmt"
	"net/netip"
	"sync"

	"golang.org/x/sys/windows"
	"golang.zx2c4.com/wireguard/windows/tunnel/winipcfg"
)

// windowsSource registers for the IP Helper API's route, unicast address
// and interface change notifications (through winipcfg) and reads the
// default routes from the forwarding table. Built and vetted here; run
// only on Windows.
type windowsSource struct {
	hint   chan struct{}
	once   sync.Once
	routes *winipcfg.RouteChangeCallback
	addrs  *winipcfg.UnicastAddressChangeCallback
	ifaces *winipcfg.InterfaceChangeCallback
}

func newSource() (source, error) {
	s := &windowsSource{hint: make(chan struct{}, 1)}
	var err error
	if s.routes, err = winipcfg.RegisterRouteChangeCallback(func(winipcfg.MibNotificationType, *winipcfg.MibIPforwardRow2) { s.poke() }); err != nil {
		return nil, fmt.Errorf("route change notifications: %w", err)
	}
	if s.addrs, err = winipcfg.RegisterUnicastAddressChangeCallback(func(winipcfg.MibNotificationType, *winipcfg.MibUnicastIPAddressRow) { s.poke() }); err != nil {
		s.close()
		return nil, fmt.Errorf("address change notifications: %w", err)
	}
	if s.ifaces, err = winipcfg.RegisterInterfaceChangeCallback(func(winipcfg.MibNotificationType, *winipcfg.MibIPInterfaceRow) { s.poke() }); err != nil {
		s.close()
		return nil, fmt.Errorf("interface change notifications: %w", err)
	}
	return s, nil
}

func (s *windowsSource) poke() {
	select {
	case s.hint <- struct{}{}:
	default:
	}
}

func (s *windowsSource) hints() <-chan struct{} { return s.hint }

func (s *windowsSource) close() error {
	s.once.Do(func() {
		if s.routes != nil {
			_ = s.routes.Unregister()
		}
		if s.addrs != nil {
			_ = s.addrs.Unregister()
		}
		if s.ifaces != nil {
			_ = s.ifaces.Unregister()
		}
	})
	return nil
}

func (s *windowsSource) read() (State, error) {
	var st State
	byIndex, err := stdAddrs(&st)
	if err != nil {
		return st, err
	}
	rows, err := winipcfg.GetIPForwardTable2(windows.AF_UNSPEC)
	if err != nil {
		return st, fmt.Errorf("forwarding table: %w", err)
	}
	for i := range rows {
		r := &rows[i]
		if r.DestinationPrefix.PrefixLength != 0 {
			continue
		}
		ifc, ok := byIndex[int(r.InterfaceIndex)]
		if !ok {
			continue
		}
		gw := r.NextHop.Addr()
		if gw.IsUnspecified() {
			gw = netip.Addr{}
		}
		st.Default = append(st.Default, Route{Iface: ifc.Name, Gateway: gw, MTU: ifc.MTU})
	}
	return st, nil
}
