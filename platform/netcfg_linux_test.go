package platform

import (
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/netnstest"
	"github.com/vishvananda/netns"
)

// inNS runs f on this goroutine's OS thread switched into ns, so that the
// netlink calls f makes act there and not on the machine's own interfaces.
func inNS(t *testing.T, ns *netnstest.NS, f func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	h, err := netns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// A thread left in the test namespace must die with its goroutine:
		// unlock only when it is back home.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		orig.Close()
	}()
	f()
}

func TestTunnelNetLinux(t *testing.T) {
	netnstest.Require(t, "ip")
	ns := netnstest.New(t, "pn")
	ns.MustExec("ip", "tuntap", "add", "dev", "tn0", "mode", "tun")
	// A route someone else added by hand through the interface must survive.
	ns.MustExec("ip", "link", "set", "tn0", "up")
	ns.MustExec("ip", "route", "add", "192.0.2.0/24", "dev", "tn0")

	addr := netip.MustParsePrefix("100.96.0.2/32")
	r1 := netip.MustParsePrefix("100.100.1.0/24")
	r2 := netip.MustParsePrefix("100.100.2.0/24")
	inNS(t, ns, func() {
		n, err := OpenTunnelNet("tn0")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := OpenTunnelNet("nosuch0"); err == nil {
			t.Error("OpenTunnelNet of a missing interface: no error")
		}
		must(t, n.Up())
		must(t, n.SetAddresses([]netip.Prefix{addr}))
		must(t, n.SetAddresses([]netip.Prefix{addr})) // again: no change, no error
		must(t, n.SetRoutes([]netip.Prefix{r1, r2}))
		must(t, n.SetRoutes([]netip.Prefix{r1, r2}))
	})
	routes := ns.MustExec("ip", "route", "show", "dev", "tn0")
	for _, want := range []string{"100.100.1.0/24", "100.100.2.0/24", "192.0.2.0/24"} {
		if !strings.Contains(routes, want) {
			t.Errorf("routes of tn0 lack %s:\n%s", want, routes)
		}
	}
	if a := ns.MustExec("ip", "-4", "addr", "show", "dev", "tn0"); !strings.Contains(a, "100.96.0.2/32") {
		t.Errorf("address missing:\n%s", a)
	}

	inNS(t, ns, func() {
		n, err := OpenTunnelNet("tn0")
		if err != nil {
			t.Fatal(err)
		}
		must(t, n.SetRoutes([]netip.Prefix{r2}))
	})
	routes = ns.MustExec("ip", "route", "show", "dev", "tn0")
	if strings.Contains(routes, "100.100.1.0/24") || !strings.Contains(routes, "100.100.2.0/24") {
		t.Errorf("after SetRoutes(r2):\n%s", routes)
	}
	if !strings.Contains(routes, "192.0.2.0/24") {
		t.Errorf("the hand-made route was removed:\n%s", routes)
	}
	// (Removing the last IPv4 address makes the kernel drop the interface's
	// IPv4 routes too, so this comes last.)
	inNS(t, ns, func() {
		n, err := OpenTunnelNet("tn0")
		if err != nil {
			t.Fatal(err)
		}
		must(t, n.SetAddresses(nil))
	})
	if a := ns.MustExec("ip", "-4", "addr", "show", "dev", "tn0"); strings.Contains(a, "100.96.0.2") {
		t.Errorf("address not removed:\n%s", a)
	}

	// Another kind of interface of the name is someone else's: refused.
	ns.MustExec("ip", "link", "add", "vx0", "type", "veth", "peer", "name", "vx1")
	inNS(t, ns, func() {
		if err := DeleteInterface("vx0"); err == nil || !strings.Contains(err.Error(), "--interface") {
			t.Errorf("DeleteInterface(veth) = %v", err)
		}
	})
	if _, err := ns.Exec("ip", "link", "show", "vx0"); err != nil {
		t.Error("a veth was deleted")
	}
	inNS(t, ns, func() {
		must(t, DeleteInterface("tn0"))
		must(t, DeleteInterface("tn0")) // already gone: not an error
		if InterfaceExists("tn0") {
			t.Error("tn0 still exists")
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
