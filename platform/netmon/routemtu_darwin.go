package netmon

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/net/route"
	"golang.org/x/sys/unix"
)

// RouteMTU is the MTU of the path the routing table gives to dst: an
// RTM_GET on a routing socket (what `route -n get dst` does) names the
// route's interface and carries the route's own MTU in its metrics; the
// smaller of the two is what the tunnel's datagrams to a VPN server can
// carry, so its TCP clamp fits that and not another VPN's interface.
// Built and vetted here; run only on a Mac (no macOS machine in this lab).
func RouteMTU(dst netip.Addr) (int, error) {
	dst = dst.Unmap()
	if !dst.IsValid() {
		return 0, fmt.Errorf("route to %s: not an address", dst)
	}
	fd, err := unix.Socket(unix.AF_ROUTE, unix.SOCK_RAW, unix.AF_UNSPEC)
	if err != nil {
		return 0, fmt.Errorf("route to %s: routing socket: %w", dst, err)
	}
	defer unix.Close(fd)
	// Every process's routing messages arrive on this socket too; the
	// answer is the one with our pid and sequence, and a second is plenty.
	tv := unix.NsecToTimeval(int64(time.Second))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return 0, fmt.Errorf("route to %s: %w", dst, err)
	}
	var a route.Addr = &route.Inet6Addr{IP: dst.As16()}
	if dst.Is4() {
		a = &route.Inet4Addr{IP: dst.As4()}
	}
	// A routing socket hears every RTM_GET's answer, this process's other
	// lookups' too: a random sequence tells ours apart.
	seq := int(rand.Int32())
	pid := os.Getpid()
	req := &route.RouteMessage{Version: unix.RTM_VERSION, Type: unix.RTM_GET, Flags: unix.RTF_UP | unix.RTF_HOST,
		ID: uintptr(pid), Seq: seq, Addrs: []route.Addr{unix.RTAX_DST: a}}
	b, err := req.Marshal()
	if err != nil {
		return 0, fmt.Errorf("route to %s: %w", dst, err)
	}
	if _, err := unix.Write(fd, b); err != nil {
		return 0, fmt.Errorf("route to %s: %w", dst, err) // ESRCH: no route
	}
	buf := make([]byte, 2048)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("route to %s: %w", dst, err)
		}
		msgs, err := route.ParseRIB(route.RIBTypeRoute, buf[:n])
		if err != nil || len(msgs) == 0 {
			continue
		}
		m, ok := msgs[0].(*route.RouteMessage)
		if !ok || m.Type != unix.RTM_GET || m.ID != uintptr(pid) || m.Seq != seq {
			continue
		}
		ifc, err := net.InterfaceByIndex(m.Index)
		if err != nil {
			return 0, fmt.Errorf("route to %s: interface %d: %w", dst, m.Index, err)
		}
		return min(ifc.MTU, metricsMTU(buf[:n], ifc.MTU)), nil
	}
	return 0, fmt.Errorf("route to %s: no answer from the routing socket", dst)
}

// metricsMTU is rmx_mtu of an rt_msghdr (<net/route.h>: the header's 36
// bytes, then rt_metrics' rmx_locks and rmx_mtu), or def where it is unset.
func metricsMTU(msg []byte, def int) int {
	const off = 40
	if len(msg) < off+4 {
		return def
	}
	if mtu := int(binary.NativeEndian.Uint32(msg[off:])); mtu > 0 {
		return mtu
	}
	return def
}
