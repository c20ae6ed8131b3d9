package api

import (
	"net/netip"
	"testing"
)

func TestMappedRoundTrip(t *testing.T) {
	m, err := MappedRange(7)
	if err != nil {
		t.Fatal(err)
	}
	if m.String() != "fd52:4f53:5600:7::/96" {
		t.Fatalf("range of site 7 = %s", m)
	}
	a := MappedAddr(m, netip.MustParseAddr("10.96.0.20"))
	if a.String() != "fd52:4f53:5600:7::a60:14" {
		t.Fatalf("10.96.0.20 mapped = %s", a)
	}
	back, err := Unmapped(m, a)
	if err != nil || back.String() != "10.96.0.20" {
		t.Fatalf("unmapped %s = %s, %v", a, back, err)
	}
	if p := MappedPrefix(m, netip.MustParsePrefix("10.96.0.0/12")); p.String() != "fd52:4f53:5600:7::a60:0/108" {
		t.Fatalf("10.96.0.0/12 mapped = %s", p)
	}
	other, _ := MappedRange(8)
	if _, err := Unmapped(other, a); err == nil {
		t.Fatal("an address of site 7 unmapped in site 8's range")
	}
	if d := DeviceAddr6(netip.MustParseAddr("100.96.0.2")); d.String() != "fd52:4f53:5600::6460:2" {
		t.Fatalf("device address = %s", d)
	}
	for _, bad := range []int{0, -1, MaxSite + 1} {
		if _, err := MappedRange(bad); err == nil {
			t.Errorf("site %d accepted", bad)
		}
	}
}

func FuzzMapping(f *testing.F) {
	f.Add(uint16(1), []byte{10, 96, 0, 10}, uint8(12))
	f.Add(uint16(65535), []byte{255, 255, 255, 255}, uint8(32))
	f.Fuzz(func(t *testing.T, site uint16, v4 []byte, bits uint8) {
		if site == 0 || len(v4) != 4 {
			return
		}
		m, err := MappedRange(int(site))
		if err != nil {
			t.Fatal(err)
		}
		a := netip.AddrFrom4([4]byte(v4))
		mapped := MappedAddr(m, a)
		if !m.Contains(mapped) {
			t.Fatalf("%s mapped to %s, outside %s", a, mapped, m)
		}
		back, err := Unmapped(m, mapped)
		if err != nil || back != a {
			t.Fatalf("%s → %s → %s, %v", a, mapped, back, err)
		}
		p := netip.PrefixFrom(a, int(bits%33)).Masked()
		mp := MappedPrefix(m, p)
		if mp.Contains(mapped) != p.Contains(a) || mp.Bits() != 96+p.Bits() {
			t.Fatalf("prefix %s mapped to %s: containment of %s differs", p, mp, a)
		}
		// An address of another site never unmaps here.
		o, _ := MappedRange(int(site%MaxSite) + 1)
		if o != m {
			if _, err := Unmapped(m, MappedAddr(o, a)); err == nil {
				t.Fatalf("site %s address unmapped in %s", o, m)
			}
		}
	})
}

func TestClusterInsideCheck(t *testing.T) {
	good := ClusterInside{NodeNetwork: "10.10.0.0/24", PodRange: "10.244.0.0/16", ServiceRange: "10.96.0.0/12",
		DNSServer: "10.96.0.10", APIAddress: "10.10.0.100", Mapped: "fd52:4f53:5600:1::/96"}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	if n := len(good.Prefixes()); n != 3 {
		t.Fatalf("%d prefixes", n)
	}
	for _, bad := range []ClusterInside{
		{NodeNetwork: "10.10.0.0"},
		{PodRange: "fd00::/64"},
		{ServiceRange: "0.0.0.0/0"},
		{ServiceRange: "100.96.0.0/24"},
		{ServiceRange: "10.96.0.0/12", DNSServer: "10.97.0.10x"},
		{ServiceRange: "10.96.0.0/12", DNSServer: "192.168.0.10"},
		{ServiceRange: "10.96.0.0/12", Mapped: "fd00::/96"},
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
