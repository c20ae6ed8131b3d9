package api

import (
	"net/netip"
	"testing"
)

func TestAddressKind(t *testing.T) {
	for addr, want := range map[string]string{
		"10.77.0.21": AddressPrivate, "192.168.1.2": AddressPrivate, "100.100.1.1": AddressPrivate, "100.64.0.1": AddressPrivate,
		"fd00::1": AddressPrivate, "127.0.0.1": AddressPrivate, "169.254.1.1": AddressPrivate, "::ffff:10.0.0.1": AddressPrivate,
		"198.51.100.22": AddressPublic, "8.8.8.8": AddressPublic, "100.128.0.1": AddressPublic, "2001:db8::1": AddressPublic,
	} {
		if got := AddressKind(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: %s, want %s", addr, got, want)
		}
	}
}
