package pool

import (
	"net/netip"
	"testing"
)

func TestPools(t *testing.T) {
	d, err := NewDevices(netip.MustParsePrefix("100.96.0.0/16"))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := d.Range()
	if d.Addr(lo).String() != "100.96.0.2" || d.Addr(hi).String() != "100.96.255.254" {
		t.Fatalf("device range %s..%s", d.Addr(lo), d.Addr(hi))
	}
	s, err := NewServices(netip.MustParsePrefix("100.100.0.0/16"))
	if err != nil {
		t.Fatal(err)
	}
	lo, hi = s.Range()
	if s.Subnet(lo).String() != "100.100.1.0/24" || s.Subnet(hi).String() != "100.100.255.0/24" {
		t.Fatalf("service range %s..%s", s.Subnet(lo), s.Subnet(hi))
	}
	if Overlaps(d, s) {
		t.Fatal("default pools overlap")
	}
	if _, err := NewServices(netip.MustParsePrefix("100.100.0.0/24")); err == nil {
		t.Fatal("a /24 service pool accepted")
	}
	if _, err := NewDevices(netip.MustParsePrefix("fd00::/64")); err == nil {
		t.Fatal("an IPv6 device pool accepted")
	}
}
