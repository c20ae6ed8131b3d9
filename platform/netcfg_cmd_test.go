package platform

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/testenv"
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

func wantRan(t *testing.T, f *fakeTools, want ...string) {
	t.Helper()
	got := f.take()
	if !slices.Equal(got, want) {
		t.Errorf("ran:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestUtunCommands(t *testing.T) {
	f := &fakeTools{}
	n := newOpsNet("utun5", utunOps{name: "utun5", run: f.run, list: func() ([]netip.Prefix, error) { return f.addrs, nil }})

	mustNoErr(t, n.Up())
	wantRan(t, f, "/sbin/ifconfig utun5 up")

	f.addrs = prefixes("fe80::1/64", "100.96.0.2/32") // fe80::1, the kernel's own: left alone
	mustNoErr(t, n.SetAddresses(prefixes("100.96.0.9/32", "fd7a:115c::9/128")))
	wantRan(t, f,
		"/sbin/ifconfig utun5 inet 100.96.0.9/32 100.96.0.9 alias",
		"/sbin/ifconfig utun5 inet6 fd7a:115c::9 prefixlen 128 alias",
		"/sbin/ifconfig utun5 inet 100.96.0.2 -alias")
	f.addrs = prefixes("100.96.0.9/32", "fd7a:115c::9/128")
	mustNoErr(t, n.SetAddresses(nil))
	wantRan(t, f, "/sbin/ifconfig utun5 inet 100.96.0.9 -alias", "/sbin/ifconfig utun5 inet6 fd7a:115c::9 -alias")

	mustNoErr(t, n.SetRoutes(prefixes("100.100.1.7/24", "fd00:1::/64")))
	wantRan(t, f,
		"/sbin/route -q -n add -inet 100.100.1.0/24 -interface utun5",
		"/sbin/route -q -n add -inet6 fd00:1::/64 -interface utun5")
	mustNoErr(t, n.SetRoutes(nil))
	wantRan(t, f,
		"/sbin/route -q -n delete -inet 100.100.1.0/24 -interface utun5",
		"/sbin/route -q -n delete -inet6 fd00:1::/64 -interface utun5")
}

// TestUtunFailures: a failure names the command line and carries its
// output; a delete whose output says there was nothing to delete is
// errGone, which opsNet takes for done.
func TestUtunFailures(t *testing.T) {
	f := &fakeTools{fails: map[string]string{
		"/sbin/route -q -n add -inet 100.100.1.0/24":    "route: writing to routing socket: File exists",
		"/sbin/route -q -n delete -inet 100.100.1.0/24": "route: writing to routing socket: Operation not permitted",
		"/sbin/route -q -n delete -inet 100.100.2.0/24": "route: writing to routing socket: not in table",
		"/sbin/ifconfig utun3 inet 100.96.0.2 -alias":   "ifconfig: ioctl (SIOCDIFADDR): Can't assign requested address",
		"/sbin/ifconfig utun3 inet6 fd7a::2 -alias":     "ifconfig: ioctl (SIOCDIFADDR_IN6): Operation not permitted",
	}}
	o := utunOps{name: "utun3", run: f.run}

	err := o.addRoute(netip.MustParsePrefix("100.100.1.0/24"))
	if err == nil || errors.Is(err, errGone) || err.Error() != "/sbin/route -q -n add -inet 100.100.1.0/24 -interface utun3: exit status 1: route: writing to routing socket: File exists" {
		t.Errorf("add route: %v", err)
	}
	for p, gone := range map[string]bool{"100.100.1.0/24": false, "100.100.2.0/24": true} {
		if err := o.delRoute(netip.MustParsePrefix(p)); err == nil || errors.Is(err, errGone) != gone {
			t.Errorf("delete route %s: %v, want gone %v", p, err, gone)
		}
	}
	for p, gone := range map[string]bool{"100.96.0.2/32": true, "fd7a::2/128": false} {
		if err := o.delAddress(netip.MustParsePrefix(p)); err == nil || errors.Is(err, errGone) != gone {
			t.Errorf("delete address %s: %v, want gone %v", p, err, gone)
		}
	}
	if err := o.delAddress(netip.MustParsePrefix("100.96.0.5/32")); err != nil {
		t.Errorf("delete address that works: %v", err)
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
		ps, err := InterfaceAddrs(ifi.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ps, netip.MustParsePrefix("127.0.0.1/8")) {
			t.Errorf("%s: %v lacks 127.0.0.1/8", ifi.Name, ps)
		}
		return
	}
	testenv.Skip(t, "needs a loopback interface")
}
