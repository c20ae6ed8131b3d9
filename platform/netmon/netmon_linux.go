package netmon

import (
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// linuxSource follows netlink's address, route and link updates; the state
// is read back with netlink too (the main routing table's default routes
// and every interface's global addresses).
type linuxSource struct {
	h     *netlink.Handle
	hint  chan struct{}
	done  chan struct{}
	once  sync.Once
	addrs chan netlink.AddrUpdate
	rts   chan netlink.RouteUpdate
	links chan netlink.LinkUpdate
}

func newSource() (source, error) { return newLinuxSource(netns.None()) }

// newLinuxSource follows the network namespace ns (netns.None(): this
// process's; the tests give their own).
func newLinuxSource(ns netns.NsHandle) (*linuxSource, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	s := &linuxSource{h: h, hint: make(chan struct{}, 1), done: make(chan struct{}),
		addrs: make(chan netlink.AddrUpdate, 64), rts: make(chan netlink.RouteUpdate, 64), links: make(chan netlink.LinkUpdate, 64)}
	var nsp *netns.NsHandle
	if ns.IsOpen() {
		nsp = &ns
	}
	onErr := func(error) { s.poke() } // a lost subscription: re-read (the recheck keeps it honest)
	if err := netlink.AddrSubscribeWithOptions(s.addrs, s.done, netlink.AddrSubscribeOptions{Namespace: nsp, ErrorCallback: onErr}); err != nil {
		s.close()
		return nil, fmt.Errorf("netlink address updates: %w", err)
	}
	if err := netlink.RouteSubscribeWithOptions(s.rts, s.done, netlink.RouteSubscribeOptions{Namespace: nsp, ErrorCallback: onErr}); err != nil {
		s.close()
		return nil, fmt.Errorf("netlink route updates: %w", err)
	}
	if err := netlink.LinkSubscribeWithOptions(s.links, s.done, netlink.LinkSubscribeOptions{Namespace: nsp, ErrorCallback: onErr}); err != nil {
		s.close()
		return nil, fmt.Errorf("netlink link updates: %w", err)
	}
	go s.pump()
	return s, nil
}

// pump turns every update into a hint; which one it was does not matter,
// the state is read again.
func (s *linuxSource) pump() {
	for {
		select {
		case <-s.done:
			return
		case <-s.addrs:
		case <-s.rts:
		case <-s.links:
		}
		s.poke()
	}
}

func (s *linuxSource) poke() {
	select {
	case s.hint <- struct{}{}:
	default:
	}
}

func (s *linuxSource) hints() <-chan struct{} { return s.hint }

func (s *linuxSource) close() error {
	s.once.Do(func() {
		close(s.done)
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
