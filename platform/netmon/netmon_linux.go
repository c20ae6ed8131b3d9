package netmon

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// linuxSource takes netlink's address, route and link notifications as
// hints (one route socket subscribed to their groups, read into one
// buffer: the tunnel's own route changes arrive here too, and must cost
// nothing), and reads the state back with vishvananda/netlink (the main
// routing table's default routes and every interface's global addresses).
type linuxSource struct {
	h    *netlink.Handle
	f    *os.File // the notification socket, non-blocking: Close wakes the reader
	hint chan struct{}
	once sync.Once
}

// groups are the notifications that can change the state.
const groups = unix.RTMGRP_LINK | unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR |
	unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE

func newSource() (source, error) { return newLinuxSource(netns.None()) }

// newLinuxSource follows the network namespace ns (netns.None(): this
// process's; the tests give their own).
func newLinuxSource(ns netns.NsHandle) (*linuxSource, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	fd, err := socketIn(ns)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("netlink notifications: %w", err)
	}
	s := &linuxSource{h: h, f: os.NewFile(uintptr(fd), "netlink"), hint: make(chan struct{}, 1)}
	go s.pump()
	return s, nil
}

// socketIn opens the notification socket inside ns (a socket belongs to
// the namespace it was made in).
func socketIn(ns netns.NsHandle) (int, error) {
	if ns.IsOpen() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, err := netns.Get()
		if err != nil {
			return -1, err
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			return -1, err
		}
		defer func() { _ = netns.Set(orig) }() // back where the thread was
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// pump turns every notification into a hint; which one it was does not
// matter, the state is read again. An overrun socket (ENOBUFS) is a hint
// too.
func (s *linuxSource) pump() {
	buf := make([]byte, 64<<10)
	for {
		_, err := s.f.Read(buf)
		if err != nil && !errors.Is(err, unix.ENOBUFS) {
			return // closed
		}
		select {
		case s.hint <- struct{}{}:
		default:
		}
	}
}

func (s *linuxSource) hints() <-chan struct{} { return s.hint }

func (s *linuxSource) close() error {
	s.once.Do(func() {
		_ = s.f.Close()
		s.h.Close()
	})
	return nil
}

func (s *linuxSource) read() (State, error) {
	var st State
	names := map[int]netlink.Link{}
	link := func(i int) netlink.Link {
		if l, ok := names[i]; ok {
			return l
		}
		l, err := s.h.LinkByIndex(i)
		if err != nil {
			l = nil
		}
		names[i] = l
		return l
	}
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := s.h.RouteList(nil, fam)
		if err != nil {
			return st, fmt.Errorf("routes: %w", err)
		}
		for _, r := range rs {
			if !isDefault(r.Dst) {
				continue
			}
			l := link(r.LinkIndex)
			if l == nil {
				continue
			}
			gw, _ := netip.AddrFromSlice(r.Gw)
			st.Default = append(st.Default, Route{Iface: l.Attrs().Name, Gateway: gw.Unmap(), MTU: l.Attrs().MTU})
		}
	}
	as, err := s.h.AddrList(nil, unix.AF_UNSPEC)
	if err != nil {
		return st, fmt.Errorf("addresses: %w", err)
	}
	for _, a := range as {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || !ip.Unmap().IsGlobalUnicast() {
			continue
		}
		l := link(a.LinkIndex)
		if l == nil || l.Attrs().Flags&net.FlagUp == 0 {
			continue // a link that is down carries nothing, whatever it still holds
		}
		ones, _ := a.Mask.Size()
		st.Addrs = append(st.Addrs, Addr{Iface: l.Attrs().Name, Addr: netip.PrefixFrom(ip.Unmap(), ones), MTU: l.Attrs().MTU})
	}
	return st, nil
}

func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0
}
