package platform

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// fakeTools records the command lines a cmdNet runs and answers with the
// output and error the test scripted for a command line's prefix.
type fakeTools struct {
	ran   []string
	fails map[string]string // command line prefix → output of a failure
	addrs []netip.Prefix
}

func (f *fakeTools) run(argv []string) ([]byte, error) {
	line := strings.Join(argv, " ")
	f.ran = append(f.ran, line)
	for prefix, out := range f.fails {
		if strings.HasPrefix(line, prefix) {
			return []byte(out), errors.New("exit status 1")
		}
	}
	return nil, nil
}

func (f *fakeTools) take() []string { r := f.ran; f.ran = nil; return r }

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func wantRan(t *testing.T, f *fakeTools, want ...string) {
	t.Helper()
	got := f.take()
	if !slices.Equal(got, want) {
		t.Errorf("ran:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestUtunCommands(t *testing.T) {
	f := &fakeTools{}
	n := newCmdNet("utun5", utunCmds{}, f.run, func() ([]netip.Prefix, error) { return f.addrs, nil })

	mustNoErr(t, n.Up())
	wantRan(t, f, "/sbin/ifconfig utun5 up")

	f.addrs = prefixes("fe80::1/64") // the kernel's own: left alone
	mustNoErr(t, n.SetAddresses(prefixes("100.96.0.2/32")))
	wantRan(t, f, "/sbin/ifconfig utun5 inet 100.96.0.2/32 100.96.0.2 alias")

	f.addrs = prefixes("fe80::1/64", "100.96.0.2/32")
	mustNoErr(t, n.SetAddresses(prefixes("100.96.0.2/32")))
	wantRan(t, f) // the same set again changes nothing

	mustNoErr(t, n.SetAddresses(prefixes("100.96.0.9/32", "fd7a:115c::9/128")))
	wantRan(t, f,
		"/sbin/ifconfig utun5 inet 100.96.0.9/32 100.96.0.9 alias",
		"/sbin/ifconfig utun5 inet6 fd7a:115c::9 prefixlen 128 alias",
		"/sbin/ifconfig utun5 inet 100.96.0.2 -alias")

	f.addrs = prefixes("100.96.0.9/32", "fd7a:115c::9/128")
	mustNoErr(t, n.SetAddresses(nil))
	wantRan(t, f, "/sbin/ifconfig utun5 inet 100.96.0.9 -alias", "/sbin/ifconfig utun5 inet6 fd7a:115c::9 -alias")

	// Routes: masked, added once, removed when no longer wanted.
	mustNoErr(t, n.SetRoutes(prefixes("100.100.1.7/24", "100.100.2.0/24", "fd00:1::/64")))
	wantRan(t, f,
		"/sbin/route -q -n add -inet 100.100.1.0/24 -interface utun5",
		"/sbin/route -q -n add -inet 100.100.2.0/24 -interface utun5",
		"/sbin/route -q -n add -inet6 fd00:1::/64 -interface utun5")
	mustNoErr(t, n.SetRoutes(prefixes("100.100.1.0/24", "100.100.2.0/24", "fd00:1::/64")))
	wantRan(t, f)
	mustNoErr(t, n.SetRoutes(prefixes("100.100.2.0/24")))
	got := f.take()
	slices.Sort(got) // map order
	if want := []string{
		"/sbin/route -q -n delete -inet 100.100.1.0/24 -interface utun5",
		"/sbin/route -q -n delete -inet6 fd00:1::/64 -interface utun5",
	}; !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}
}

func TestCmdNetRouteFailures(t *testing.T) {
	f := &fakeTools{fails: map[string]string{}}
	n := newCmdNet("utun3", utunCmds{}, f.run, func() ([]netip.Prefix, error) { return nil, nil })

	// A prefix routed elsewhere already: an error with the context, and
	// the route is not taken for ours.
	f.fails["/sbin/route -q -n add -inet 100.100.1.0/24"] = "route: writing to routing socket: File exists"
	err := n.SetRoutes(prefixes("100.100.1.0/24", "100.100.2.0/24"))
	if err == nil || !strings.Contains(err.Error(), "add route 100.100.1.0/24 via utun3") || !strings.Contains(err.Error(), "File exists") {
		t.Fatalf("err = %v", err)
	}
	f.take()
	delete(f.fails, "/sbin/route -q -n add -inet 100.100.1.0/24")
	mustNoErr(t, n.SetRoutes(prefixes("100.100.1.0/24", "100.100.2.0/24"))) // tried again
	wantRan(t, f, "/sbin/route -q -n add -inet 100.100.1.0/24 -interface utun3")

	// A failed delete stays ours and is tried again; one the OS no longer
	// has is forgotten.
	f.fails["/sbin/route -q -n delete -inet 100.100.1.0/24"] = "route: writing to routing socket: Operation not permitted"
	f.fails["/sbin/route -q -n delete -inet 100.100.2.0/24"] = "route: writing to routing socket: not in table"
	if err := n.SetRoutes(nil); err == nil || !strings.Contains(err.Error(), "remove route 100.100.1.0/24") {
		t.Fatalf("err = %v", err)
	}
	f.take()
	f.fails = nil
	mustNoErr(t, n.SetRoutes(nil))
	wantRan(t, f, "/sbin/route -q -n delete -inet 100.100.1.0/24 -interface utun3")

	// The addresses could not be read: nothing is run.
	bad := newCmdNet("utun3", utunCmds{}, f.run, func() ([]netip.Prefix, error) { return nil, errors.New("no such interface") })
	if err := bad.SetAddresses(prefixes("100.96.0.2/32")); err == nil || !strings.Contains(err.Error(), "list addresses of utun3") {
		t.Errorf("err = %v", err)
	}
	wantRan(t, f)
}

func TestNetshCommands(t *testing.T) {
	f := &fakeTools{}
	n := newCmdNet("wg1", netshCmds{netsh: `C:\Windows\System32\netsh.exe`}, f.run, func() ([]netip.Prefix, error) { return f.addrs, nil })
	mustNoErr(t, n.Up())
	wantRan(t, f) // Wintun is up with its session

	f.addrs = prefixes("100.96.0.2/32", "fe80::5/64")
	mustNoErr(t, n.SetAddresses(prefixes("100.96.0.3/32", "fd7a::3/128")))
	const netsh = `C:\Windows\System32\netsh.exe`
	wantRan(t, f,
		netsh+" interface ipv4 add address name=wg1 address=100.96.0.3 mask=255.255.255.255 store=active",
		netsh+" interface ipv6 add address interface=wg1 address=fd7a::3/128 store=active",
		netsh+" interface ipv4 delete address name=wg1 address=100.96.0.2")
	f.addrs = prefixes("fd7a::3/128")
	mustNoErr(t, n.SetAddresses(nil))
	wantRan(t, f, netsh+" interface ipv6 delete address interface=wg1 address=fd7a::3")

	mustNoErr(t, n.SetRoutes(prefixes("100.100.1.0/24", "fd00:2::/64")))
	wantRan(t, f,
		netsh+" interface ipv4 add route prefix=100.100.1.0/24 interface=wg1 store=active",
		netsh+" interface ipv6 add route prefix=fd00:2::/64 interface=wg1 store=active")
	mustNoErr(t, n.SetRoutes(prefixes("fd00:2::/64")))
	wantRan(t, f, netsh+" interface ipv4 delete route prefix=100.100.1.0/24 interface=wg1 store=active")

	if !(netshCmds{}).notFound([]byte("Element not found.\r\n")) || (netshCmds{}).notFound([]byte("Access is denied.")) {
		t.Error("netsh notFound")
	}
	for name, ok := range map[string]bool{"wg1": true, "RunOS VPN": false, `a"b`: false, "a=b": false, "": false} {
		if err := checkNetshName(name); (err == nil) != ok {
			t.Errorf("checkNetshName(%q) = %v", name, err)
		}
	}
}

func TestDiffPrefixes(t *testing.T) {
	add, del := diffPrefixes(prefixes("10.0.0.1/32", "10.0.0.2/32", "10.0.0.2/32"), prefixes("10.0.0.3/32", "10.0.0.1/32", "10.0.0.3/32"))
	if !slices.Equal(add, prefixes("10.0.0.3/32")) || !slices.Equal(del, prefixes("10.0.0.2/32")) {
		t.Errorf("add %v del %v", add, del)
	}
	if add, del := diffPrefixes(nil, nil); add != nil || del != nil {
		t.Errorf("empty: %v %v", add, del)
	}
}

func TestPrefixOfIPNet(t *testing.T) {
	for _, tc := range []struct {
		n    net.IPNet
		want string
	}{
		{net.IPNet{IP: net.ParseIP("100.96.0.2"), Mask: net.CIDRMask(32, 32)}, "100.96.0.2/32"},
		{net.IPNet{IP: net.ParseIP("100.96.0.2"), Mask: net.CIDRMask(120, 128)}, "100.96.0.2/24"}, // 16-byte form
		{net.IPNet{IP: net.ParseIP("fd00::1"), Mask: net.CIDRMask(64, 128)}, "fd00::1/64"},
	} {
		p, ok := prefixOfIPNet(&tc.n)
		if !ok || p.String() != tc.want {
			t.Errorf("prefixOfIPNet(%v) = %v %v, want %s", tc.n, p, ok, tc.want)
		}
	}
	if _, ok := prefixOfIPNet(&net.IPNet{IP: net.ParseIP("10.0.0.1")}); ok {
		t.Error("no mask accepted")
	}
}

func TestInterfaceAddrsLoopback(t *testing.T) {
	// The real lookup every OS shares: loopback carries 127.0.0.1/8
	// (lo on Linux, lo0 on macOS); Windows has no loopback interface.
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagLoopback == 0 {
			continue
		}
		ps, err := interfaceAddrs(ifi.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ps, netip.MustParsePrefix("127.0.0.1/8")) {
			t.Errorf("%s: %v lacks 127.0.0.1/8", ifi.Name, ps)
		}
		return
	}
	t.Skip("no loopback interface")
}

func mustNoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
