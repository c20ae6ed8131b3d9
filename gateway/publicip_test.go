package gateway

import (
	"net/netip"
	"testing"
)

func TestIsPublic(t *testing.T) {
	for s, want := range map[string]bool{
		"198.51.100.21": true, // documentation range: public, as the lab uses it
		"203.0.113.5":   true,
		"8.8.8.8":       true,
		"10.77.0.21":    false,
		"192.168.1.2":   false,
		"172.16.0.1":    false,
		"100.64.0.1":    false, // CGNAT
		"127.0.0.1":     false,
		"169.254.1.1":   false,
		"fd00::1":       false,
		"fe80::1":       false,
		"2001:db8::1":   true,
	} {
		if got := isPublic(netip.MustParseAddr(s)); got != want {
			t.Errorf("isPublic(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestDetectPublicIPLoopback(t *testing.T) {
	// Towards a loopback control the source is loopback: nothing to report.
	if ip := DetectPublicIP("https://127.0.0.1:8443")(); ip != "" {
		t.Fatalf("detected %q towards loopback", ip)
	}
	if ip := DetectPublicIP("::bad")(); ip != "" {
		t.Fatalf("detected %q from a bad URL", ip)
	}
}
