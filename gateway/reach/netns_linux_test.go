package reach

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/syncbuf"
	"github.com/vishvananda/netns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// inNS runs fn on a thread inside the named namespace; the thread dies
// with it, so no other goroutine ever runs there.
func inNS(t *testing.T, name string, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(name)
		if err == nil {
			err = netns.Set(h)
			h.Close()
		}
		if err == nil {
			fn()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// nsOS is LinuxOS whose reply sockets are made in the node's namespace
// (the forwarder makes them on its own goroutines, which in a test run in
// the test's namespace; in the gateway the whole process is the node's).
type nsOS struct {
	LinuxOS
	t  *testing.T
	ns string
}

func (o nsOS) ReplyConn(local, remote netip.AddrPort) (c net.Conn, err error) {
	inNS(o.t, o.ns, func() { c, err = o.LinuxOS.ReplyConn(local, remote) })
	return c, err
}

func dialIn(t *testing.T, ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		inNS(t, ns, func() { c, err = (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, network, addr) })
		return c, err
	}
}

// The forwarder on a real node namespace: the table it programs through
// netlink is what the stock nft tool lists, first made and then replaced;
// a device's TCP connections to a declared node address and to a ClusterIP
// that the node translates (as kube-proxy does, in prerouting and output)
// both reach the server behind the node, answered through the node with no
// route back; the device pings that server and a pod behind it; what else
// the device sends is dropped and counted by reason; Close leaves nothing
// behind.
func TestForwardOnRealNode(t *testing.T) {
	netnstest.Require(t, "ip", "nft", "ping")
	dev, node, inner := netnstest.New(t, "rdev"), netnstest.New(t, "rnode"), netnstest.New(t, "rin")
	netnstest.Link(t, dev, "d0", "100.96.0.2/32", node, "wgt0", "100.100.3.1/32")
	// A WireGuard interface carries no neighbour discovery or router
	// solicitations; the veth standing in for it must not either (they
	// would be counted as undeclared).
	dev.MustExec("sysctl", "-qw", "net.ipv6.conf.d0.disable_ipv6=1")
	dev.MustExec("ip", "route", "add", "100.100.3.1/32", "dev", "d0")
	dev.MustExec("ip", "route", "add", "default", "via", "100.100.3.1", "dev", "d0", "onlink")
	node.MustExec("ip", "route", "add", "100.96.0.2/32", "dev", "wgt0")
	netnstest.Link(t, node, "int0", "10.10.0.1/24", inner, "i0", "10.10.0.2/24")
	node.MustExec("ip", "addr", "add", "192.0.2.1/32", "dev", "lo") // another network of the node
	node.MustExec("ip", "route", "add", "10.96.0.0/12", "dev", "int0")
	inner.MustExec("ip", "addr", "add", "10.244.1.5/32", "dev", "lo") // a pod on the inner node
	node.MustExec("ip", "route", "add", "10.244.0.0/16", "via", "10.10.0.2")
	node.MustExec("sh", "-c", `nft -f - <<'E'
table ip kube {
	chain output {
		type nat hook output priority -100; policy accept;
		ip daddr 10.96.0.20 tcp dport 80 dnat to 10.10.0.2:8080
		ip daddr 10.96.0.10 udp dport 53 dnat to 10.10.0.2:5353
	}
	chain prerouting {
		type nat hook prerouting priority -100; policy accept;
		ip daddr 10.96.0.20 tcp dport 80 dnat to 10.10.0.2:8080
		ip daddr 10.96.0.10 udp dport 53 dnat to 10.10.0.2:5353
	}
}
E`)
	var ln net.Listener
	inNS(t, inner.Name, func() { ln, _ = net.Listen("tcp", "10.10.0.2:8080") })
	if ln == nil {
		t.Fatal("no listener inside")
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "inner from %s\n", c.RemoteAddr().(*net.TCPAddr).IP)
			c.Close()
		}
	}()

	var pc net.PacketConn
	inNS(t, inner.Name, func() { pc, _ = net.ListenPacket("udp", "10.10.0.2:5353") })
	if pc == nil {
		t.Fatal("no UDP listener inside")
	}
	defer pc.Close()
	go func() {
		b := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(append([]byte("echo from "+from.(*net.UDPAddr).IP.String()+": "), b[:n]...), from)
		}
	}()

	var logs syncbuf.Buffer
	f := New(nsOS{t: t, ns: node.Name}, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	f.dial = dialIn(t, node.Name)
	s := testSpec(t)
	s.Interface, s.Server, s.DevicePool = "wgt0", netip.MustParseAddr("100.100.3.1"), netip.MustParsePrefix("100.96.0.0/16")
	// First without the pod range, then all of it: the second Apply
	// replaces a table that is there.
	var err error
	first := s
	first.Prefixes = []netip.Prefix{netip.MustParsePrefix("10.10.0.0/24"), netip.MustParsePrefix("10.96.0.0/12")}
	for _, spec := range []Spec{first, s} {
		inNS(t, node.Name, func() { err = f.Apply(spec) })
		if err != nil {
			t.Fatal(err)
		}
		if got, want := installed(t, node), Rules(spec, f.ports).String(); got != want {
			t.Fatalf("nft lists:\n%s\nwant:\n%s", got, want)
		}
	}
	closed := false
	defer func() {
		if !closed {
			inNS(t, node.Name, func() { _ = f.Close() })
		}
	}()

	dial := dialIn(t, dev.Name)
	for _, addr := range []string{"10.10.0.2:8080", "10.96.0.20:80"} {
		c, err := dial(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatalf("device → %s: %v\n%s", addr, err, logs.String())
		}
		b, _ := io.ReadAll(c)
		c.Close()
		if got := string(b); got != "inner from 10.10.0.1\n" {
			t.Errorf("device → %s answered %q, want the inner server seeing the node's address\n%s", addr, got, logs.String())
		}
	}

	// UDP: a ClusterIP's answer comes back from the address the device
	// sent to (the socket is connected to it), twice on one flow.
	uc, err := dial(context.Background(), "udp", "10.96.0.10:53")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"one", "two"} {
		_ = uc.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := uc.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1500)
		n, err := uc.Read(b)
		if got := string(b[:n]); err != nil || got != "echo from 10.10.0.1: "+msg {
			t.Errorf("UDP to 10.96.0.10:53: %q, %v\n%s", got, err, logs.String())
		}
	}
	uc.Close()

	pingsInto(t, node, dev, &logs)

	// Probes: UDP, so nothing waits on a dropped handshake.
	probe := func(addr string) {
		t.Helper()
		c, err := dial(context.Background(), "udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("probe"))
		c.Close()
	}
	probe("192.0.2.1:9")                                        // node
	probe("100.96.0.3:9")                                       // device
	probe("10.77.0.1:9")                                        // undeclared
	inNS(t, dev.Name, func() { icmpTimestamp(t, "10.10.0.2") }) // protocol: only echo goes in
	probe("100.100.3.1:9")                                      // the server address: allowed, not counted
	want := map[string]uint64{DropNode: 1, DropDevice: 1, DropUndeclared: 1, DropProtocol: 1}
	deadline := time.Now().Add(5 * time.Second)
	var got map[string]uint64
	for time.Now().Before(deadline) {
		inNS(t, node.Name, func() { got = f.Dropped() })
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("drop counters %v, want %v", got, want)
	}

	inNS(t, node.Name, func() { err = f.Close() })
	closed = true
	if err != nil {
		t.Fatal(err)
	}
	out := node.MustExec("sh", "-c", "nft list tables; ip rule; ip route show table all | grep -c 'table 5253' || true")
	if strings.Contains(out, Table) || strings.Contains(out, "0x52530001") || !strings.HasSuffix(strings.TrimSpace(out), "0") {
		t.Errorf("left behind after Close:\n%s", out)
	}
	inNS(t, node.Name, func() { err = (LinuxOS{}).Remove() })
	if err != nil {
		t.Errorf("removing what is gone already: %v", err)
	}
}

// installed is the table as the stock nft tool lists it in ns (an
// independent reader of what the library programmed), counters' values
// left out and sets' elements on one line.
func installed(t *testing.T, ns *netnstest.NS) string {
	t.Helper()
	out := ns.MustExec("nft", "list", "table", "inet", Table)
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		switch tl := strings.TrimSpace(l); {
		case strings.HasPrefix(tl, "packets ") && strings.Contains(tl, " bytes "):
		case strings.HasSuffix(b.String(), ","):
			b.WriteString(" " + tl) // an element continued
		default:
			b.WriteString("\n" + l)
		}
	}
	return strings.TrimPrefix(b.String(), "\n")
}

// pingsInto checks ICMP echo from the device into the cluster: warned
// about while the node does not forward, answered once it does by a node
// and by a pod behind it (neither has a route back to the devices: the
// node's source NAT is what makes the answer come back).
func pingsInto(t *testing.T, node, dev *netnstest.NS, logs *syncbuf.Buffer) {
	t.Helper()
	if !strings.Contains(logs.String(), "ping into the cluster needs IPv4 forwarding") {
		t.Errorf("no warning with forwarding off:\n%s", logs.String())
	}
	node.MustExec("sysctl", "-qw", "net.ipv4.ip_forward=1")
	for _, addr := range []string{"10.10.0.2", "10.244.1.5"} {
		if out, err := dev.Exec("ping", "-c", "1", "-W", "2", addr); err != nil {
			t.Errorf("ping %s from the device: %v\n%s", addr, err, out)
		}
	}
}

// icmpTimestamp sends one ICMP timestamp request to dst from the calling
// thread's namespace.
func icmpTimestamp(t *testing.T, dst string) {
	t.Helper()
	c, err := net.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := (&icmp.Message{Type: ipv4.ICMPTypeTimestamp, Body: &icmp.RawBody{Data: make([]byte, 16)}}).Marshal(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteTo(b, &net.IPAddr{IP: net.ParseIP(dst)}); err != nil {
		t.Fatal(err)
	}
}
