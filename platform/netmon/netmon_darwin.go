package netmon

import (
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/net/route"
	"golang.org/x/sys/unix"
)

// darwinSource reads the routing socket (PF_ROUTE), on which the kernel
// announces every address, route and interface change; the state is read
// back from the routing table (a NET_RT_DUMP of the RIB) and the
// interfaces. Built and vetted here; run only on a Mac.
type darwinSource struct {
	fd   int
	hint chan struct{}
	once sync.Once
	done chan struct{}
}

func newSource() (source, error) {
	fd, err := unix.Socket(unix.AF_ROUTE, unix.SOCK_RAW, unix.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("routing socket: %w", err)
	}
	s := &darwinSource{fd: fd, hint: make(chan struct{}, 1), done: make(chan struct{})}
	go s.pump()
	return s, nil
}

func (s *darwinSource) pump() {
	buf := make([]byte, 2048)
	for {
		n, err := unix.Read(s.fd, buf)
		select {
		case <-s.done:
			return
		default:
		}
		if err != nil && err != unix.EINTR {
			return
		}
		if n < 4 {
			continue
		}
		switch buf[3] { // rtm_type
		case unix.RTM_ADD, unix.RTM_DELETE, unix.RTM_CHANGE, unix.RTM_NEWADDR, unix.RTM_DELADDR, unix.RTM_IFINFO:
			select {
			case s.hint <- struct{}{}:
			default:
			}
		}
	}
}

func (s *darwinSource) hints() <-chan struct{} { return s.hint }

func (s *darwinSource) close() error {
	s.once.Do(func() {
		close(s.done)
		_ = unix.Close(s.fd) // wakes the read
	})
	return nil
}

func (s *darwinSource) read() (State, error) {
	var st State
	byIndex, err := stdAddrs(&st)
	if err != nil {
		return st, err
	}
	rib, err := route.FetchRIB(syscall.AF_UNSPEC, route.RIBTypeRoute, 0)
	if err != nil {
		return st, fmt.Errorf("routing table: %w", err)
	}
	msgs, err := route.ParseRIB(route.RIBTypeRoute, rib)
	if err != nil {
		return st, fmt.Errorf("routing table: %w", err)
	}
	for _, m := range msgs {
		rm, ok := m.(*route.RouteMessage)
		if !ok || rm.Flags&unix.RTF_GATEWAY == 0 || len(rm.Addrs) <= unix.RTAX_NETMASK {
			continue
		}
		if !isZero(rm.Addrs[unix.RTAX_DST]) || !isZero(rm.Addrs[unix.RTAX_NETMASK]) && rm.Addrs[unix.RTAX_NETMASK] != nil {
			continue
		}
		ifc, ok := byIndex[rm.Index]
		if !ok {
			continue
		}
		st.Default = append(st.Default, Route{Iface: ifc.Name, Gateway: addrOf(rm.Addrs[unix.RTAX_GATEWAY]), MTU: ifc.MTU})
	}
	return st, nil
}

func addrOf(a route.Addr) netip.Addr {
	switch a := a.(type) {
	case *route.Inet4Addr:
		return netip.AddrFrom4(a.IP)
	case *route.Inet6Addr:
		return netip.AddrFrom16(a.IP)
	}
	return netip.Addr{}
}

// isZero: a default route's destination (and mask) is the zero address.
func isZero(a route.Addr) bool {
	switch a := a.(type) {
	case *route.Inet4Addr:
		return a.IP == [4]byte{}
	case *route.Inet6Addr:
		return a.IP == [16]byte{}
	}
	return false
}
