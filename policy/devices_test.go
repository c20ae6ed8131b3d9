package policy

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestDeviceFilters(t *testing.T) {
	p := mustLoad(t, teamPolicy)
	ada1, ada2, carl, eve := netip.MustParseAddr("100.64.0.1"), netip.MustParseAddr("100.64.0.2"), netip.MustParseAddr("100.64.0.3"), netip.MustParseAddr("100.64.0.4")
	bob := netip.MustParseAddr("100.64.0.5")
	d := CompileDevices(p, "ky3", []Device{
		{ada1, Subject{User: "ada@example.com"}},
		{ada2, Subject{User: "ada@example.com"}},
		{bob, Subject{User: "bob@example.com"}}, // oncall too: the same rules as ada
		{carl, Subject{User: "carl@example.com"}},
		{eve, Subject{User: "eve@example.com"}},
	})
	if d.Filters() != 3 {
		t.Errorf("%d filters compiled for three distinct sets of rules (oncall, contractors, none)", d.Filters())
	}
	db := *pkt("10.96.0.20", TCP, 5432)
	web := *pkt("10.96.0.30", TCP, 443)
	for _, c := range []struct {
		src   netip.Addr
		k     Packet
		allow bool
		line  int
	}{
		{ada1, web, true, 7},
		{ada2, web, true, 7},
		{bob, web, true, 7},
		{carl, db, true, 9},
		{carl, web, false, 0},
		{eve, db, false, 0},
		{netip.MustParseAddr("100.64.0.99"), db, false, 0}, // no device of the cluster
		{netip.MustParseAddr("::ffff:100.64.0.3"), db, true, 9},
	} {
		if ok, line := d.Check(c.src, c.k); ok != c.allow || line != c.line {
			t.Errorf("%s → %s: %v by line %d, want %v by line %d", c.src, c.k, ok, line, c.allow, c.line)
		}
	}
	if ok, _ := CompileDevices(nil, "ky3", nil).Check(eve, db); !ok {
		t.Error("no policy: a device is refused")
	}
}

// BenchmarkDevicesCheck1000Rules: the gateway's whole per-packet lookup,
// 1,000 rules, 200 devices of users in ten groups.
func BenchmarkDevicesCheck1000Rules(b *testing.B) {
	p, _ := bigPolicy(b)
	devs := make([]Device, 200)
	for i := range devs {
		devs[i] = Device{Addr: netip.AddrFrom4([4]byte{100, 64, 0, byte(i)}), User: Subject{User: fmt.Sprintf("u%d@example.com", i), Groups: []string{fmt.Sprintf("g%d", i%10), fmt.Sprintf("g%d", (i+1)%10)}}}
	}
	d := CompileDevices(p, "ky3", devs)
	ks := benchPackets()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		d.Check(devs[i%len(devs)].Addr, ks[i%len(ks)])
	}
}

func BenchmarkCompileDevices1000Rules(b *testing.B) {
	p, _ := bigPolicy(b)
	devs := make([]Device, 200)
	for i := range devs {
		devs[i] = Device{Addr: netip.AddrFrom4([4]byte{100, 64, 0, byte(i)}), User: Subject{User: fmt.Sprintf("u%d@example.com", i), Groups: []string{fmt.Sprintf("g%d", i%10), fmt.Sprintf("g%d", (i+1)%10)}}}
	}
	for b.Loop() {
		CompileDevices(p, "ky3", devs)
	}
}
