//go:build !windows

package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestForgedSourceDropped (issue 23, attempts around the rules): the
// gateway filters a device's packets by the device's address, so a device
// must not be able to send as another. Laptop a, connected to ky3, sends
// datagrams to a listener on the serving node with laptop b's device
// address as their source, inside its own tunnel (b's address added to a's
// wg1 and a route that picks it as the source): the node's WireGuard drops
// them (b's address is not among a's allowed IPs) and the listener sees
// none, while a's datagrams with its own address, sent before and after,
// arrive.
func TestForgedSourceDropped(t *testing.T) {
	w := newWorld(t, 2, 0)
	a, b := w.env.Clients[0].Host, w.env.Clients[1].Host
	for _, h := range []string{a, b} {
		w.must(h, nil, "runos", "vpn", "up", "--cid", "ky3")
	}
	stA := w.waitStatus(a, 30*time.Second, "a on ky3", upOn("", "ky3"))
	stB := w.waitStatus(b, 30*time.Second, "b on ky3", upOn("", "ky3"))
	own, other := deviceIPv4(t, stA), deviceIPv4(t, stB)
	c3, _ := cluster(stA, "ky3")
	node := lab.NodeHost("ky3", c3.Server.NodeID)

	pc, err := w.lab.ListenPacket(node, "udp4", c3.Server.Address+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", node, err)
	}
	defer pc.Close()
	port := pc.LocalAddr().(*net.UDPAddr).Port
	got := make(chan string, 64)
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				close(got)
				return
			}
			got <- fmt.Sprintf("%s from %s", buf[:n], from.(*net.UDPAddr).IP)
		}
	}()
	send := func(msg string) {
		t.Helper()
		w.must(a, nil, "bash", "-c", fmt.Sprintf("echo -n %s > /dev/udp/%s/%d", msg, c3.Server.Address, port))
	}
	// expect waits for msg from a's own address; anything from elsewhere
	// that arrives first fails the test.
	expect := func(msg string) {
		t.Helper()
		want := msg + " from " + own.String()
		for {
			select {
			case m, ok := <-got:
				if !ok {
					t.Fatal("listener closed")
				}
				if m == want {
					return
				}
				t.Errorf("the node received %q; want only %q", m, want)
			case <-time.After(10 * time.Second):
				t.Fatalf("%q did not arrive through a's tunnel", want)
			}
		}
	}
	send("before")
	expect("before")

	iface := stA.Tunnel.Interface
	route := fmt.Sprintf("%s/32", c3.Server.Address)
	w.must(a, nil, "ip", "addr", "add", other.String()+"/32", "dev", iface)
	w.must(a, nil, "ip", "route", "add", route, "dev", iface, "src", other.String())
	for i := range 5 {
		send(fmt.Sprintf("forged%d", i))
	}
	w.must(a, nil, "ip", "route", "del", route, "dev", iface, "src", other.String())
	w.must(a, nil, "ip", "addr", "del", other.String()+"/32", "dev", iface)
	// The same tunnel, in order: once this one is in, a forged one that had
	// got through would have been received before it.
	send("after")
	expect("after")
}

// deviceIPv4 is the device's IPv4 tunnel address from its status.
func deviceIPv4(t *testing.T, st *localapi.Status) netip.Addr {
	t.Helper()
	for _, s := range st.Tunnel.Addresses {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
			return p.Addr()
		}
	}
	t.Fatalf("no IPv4 tunnel address in %v", st.Tunnel.Addresses)
	return netip.Addr{}
}
