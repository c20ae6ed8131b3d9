package platform

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// fakeOps is an interface in memory: its addresses and the routes through
// it (anyone's), a log of the changes asked for, and scripted failures.
type fakeOps struct {
	have    []netip.Prefix
	routes  []netip.Prefix
	log     []string
	fails   map[string]error // a change as logged ("del route 10.0.0.0/8") → its error
	listErr error
}

func (f *fakeOps) do(line string) error {
	f.log = append(f.log, line)
	return f.fails[line]
}

func (f *fakeOps) up() error { return f.do("up") }

func (f *fakeOps) addrs() ([]netip.Prefix, error) { return slices.Clone(f.have), f.listErr }

func (f *fakeOps) addAddress(p netip.Prefix) error { return f.add(&f.have, "add address", p) }
func (f *fakeOps) delAddress(p netip.Prefix) error { return f.del(&f.have, "del address", p) }
func (f *fakeOps) addRoute(p netip.Prefix) error   { return f.add(&f.routes, "add route", p) }
func (f *fakeOps) delRoute(p netip.Prefix) error   { return f.del(&f.routes, "del route", p) }

func (f *fakeOps) add(set *[]netip.Prefix, op string, p netip.Prefix) error {
	if err := f.do(op + " " + p.String()); err != nil {
		return err
	}
	if slices.Contains(*set, p) {
		return errors.New("exists")
	}
	*set = append(*set, p)
	return nil
}

func (f *fakeOps) del(set *[]netip.Prefix, op string, p netip.Prefix) error {
	if err := f.do(op + " " + p.String()); err != nil {
		return err
	}
	i := slices.Index(*set, p)
	if i < 0 {
		return fmt.Errorf("%w: no %s", errGone, p)
	}
	*set = slices.Delete(*set, i, i+1)
	return nil
}

func (f *fakeOps) wantLog(t *testing.T, want ...string) {
	t.Helper()
	if !slices.Equal(f.log, want) {
		t.Errorf("changes:\n  %s\nwant:\n  %s", strings.Join(f.log, "\n  "), strings.Join(want, "\n  "))
	}
	f.log = nil
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one with %q", parts)
	}
	for _, s := range parts {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err = %v, want it to say %q", err, s)
		}
	}
}

func TestOpsNetAddresses(t *testing.T) {
	f := &fakeOps{have: prefixes("fe80::1/64", "169.254.7.1/16")} // the OS's own: left alone
	n := newOpsNet("tun0", f)

	mustNoErr(t, n.SetAddresses(prefixes("100.96.0.2/32")))
	f.wantLog(t, "add address 100.96.0.2/32")
	mustNoErr(t, n.SetAddresses(prefixes("100.96.0.2/32")))
	f.wantLog(t) // the same set again changes nothing

	// New addresses first, so a change never leaves none.
	mustNoErr(t, n.SetAddresses(prefixes("100.96.0.9/32", "fd7a:115c::9/128")))
	f.wantLog(t, "add address 100.96.0.9/32", "add address fd7a:115c::9/128", "del address 100.96.0.2/32")

	// An address already gone when its delete runs is not an error.
	f.fails = map[string]error{"del address 100.96.0.9/32": fmt.Errorf("%w: the OS took it", errGone)}
	mustNoErr(t, n.SetAddresses(nil))
	f.wantLog(t, "del address 100.96.0.9/32", "del address fd7a:115c::9/128")
	if !slices.Equal(f.have, prefixes("fe80::1/64", "169.254.7.1/16", "100.96.0.9/32")) {
		t.Errorf("have %v", f.have)
	}

	// A failed add stops before any delete: the old address stays.
	f.have, f.fails = prefixes("100.96.0.2/32"), map[string]error{"add address 100.96.0.3/32": errors.New("access denied")}
	wantErr(t, n.SetAddresses(prefixes("100.96.0.3/32")), "add address 100.96.0.3/32 to tun0", "access denied")
	f.wantLog(t, "add address 100.96.0.3/32")

	// A failed delete is an error with its context.
	f.fails = map[string]error{"del address 100.96.0.2/32": errors.New("access denied")}
	wantErr(t, n.SetAddresses(nil), "remove address 100.96.0.2/32 from tun0", "access denied")
	f.wantLog(t, "del address 100.96.0.2/32")

	// The addresses could not be read: nothing is changed.
	f.listErr = errors.New("no such interface")
	wantErr(t, n.SetAddresses(prefixes("100.96.0.5/32")), "list addresses of tun0", "no such interface")
	f.wantLog(t)
}

func TestOpsNetRoutes(t *testing.T) {
	f := &fakeOps{routes: prefixes("192.168.50.0/24")} // someone else's
	n := newOpsNet("tun0", f)

	// Masked, added once, in the caller's order.
	mustNoErr(t, n.SetRoutes(prefixes("100.100.1.7/24", "fd00:1::/64", "100.100.2.0/24", "100.100.1.0/24")))
	f.wantLog(t, "add route 100.100.1.0/24", "add route fd00:1::/64", "add route 100.100.2.0/24")
	mustNoErr(t, n.SetRoutes(prefixes("100.100.2.0/24", "100.100.1.0/24", "fd00:1::/64")))
	f.wantLog(t)

	// Only ours go, in a fixed order; someone else's stays.
	mustNoErr(t, n.SetRoutes(prefixes("100.100.2.0/24")))
	f.wantLog(t, "del route 100.100.1.0/24", "del route fd00:1::/64")
	mustNoErr(t, n.SetRoutes(nil))
	f.wantLog(t, "del route 100.100.2.0/24")
	if !slices.Equal(f.routes, prefixes("192.168.50.0/24")) {
		t.Errorf("routes %v", f.routes)
	}

	// A prefix routed through the interface already (someone else's): an
	// error with the context, the other routes still added, and the
	// route not taken for ours; the next call tries it again.
	err := n.SetRoutes(prefixes("192.168.50.0/24", "100.100.3.0/24"))
	wantErr(t, err, "add route 192.168.50.0/24 via tun0", "exists")
	f.wantLog(t, "add route 192.168.50.0/24", "add route 100.100.3.0/24")
	mustNoErr(t, n.SetRoutes(prefixes("100.100.3.0/24")))
	f.wantLog(t) // not ours, so not removed
	f.routes = nil
	mustNoErr(t, n.SetRoutes(prefixes("192.168.50.0/24", "100.100.3.0/24")))
	f.wantLog(t, "add route 192.168.50.0/24")

	// A failed delete stays ours and is tried again; one already gone
	// is forgotten; both deletes run, and the error says which failed.
	f.routes = prefixes("100.100.3.0/24") // 192.168.50.0/24 went with a flapping interface
	f.fails = map[string]error{"del route 100.100.3.0/24": errors.New("access denied")}
	wantErr(t, n.SetRoutes(nil), "remove route 100.100.3.0/24 via tun0", "access denied")
	f.wantLog(t, "del route 100.100.3.0/24", "del route 192.168.50.0/24")
	f.fails = nil
	mustNoErr(t, n.SetRoutes(nil))
	f.wantLog(t, "del route 100.100.3.0/24")
	mustNoErr(t, n.SetRoutes(nil))
	f.wantLog(t)

	// Two failures come back together.
	f.fails = map[string]error{"add route 10.1.0.0/16": errors.New("one"), "add route 10.2.0.0/16": errors.New("two")}
	err = n.SetRoutes(prefixes("10.1.0.0/16", "10.2.0.0/16"))
	wantErr(t, err, "add route 10.1.0.0/16 via tun0: one", "add route 10.2.0.0/16 via tun0: two")
}

func TestOpsNetUp(t *testing.T) {
	f := &fakeOps{}
	mustNoErr(t, newOpsNet("tun0", f).Up())
	f.wantLog(t, "up")
	f.fails = map[string]error{"up": errors.New("no such device")}
	wantErr(t, newOpsNet("tun0", f).Up(), "set tun0 up", "no such device")
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

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func mustNoErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
