package dnsplit

import (
	"context"
	"net/netip"
)

// Resolved is the part of systemd-resolved's D-Bus API
// (org.freedesktop.resolve1.Manager) split DNS uses, so that tests can stand
// in for it.
type Resolved interface {
	// Ping says whether resolve1 answers on the bus.
	Ping(ctx context.Context) error
	SetLinkDNS(ctx context.Context, ifindex int, servers []netip.Addr) error
	// SetLinkDomains sets routing-only domains (~domain): queries under
	// them go to this link's servers, and the domains are not searched.
	SetLinkDomains(ctx context.Context, ifindex int, routingOnly []string) error
	SetLinkDefaultRoute(ctx context.Context, ifindex int, enable bool) error
	RevertLink(ctx context.Context, ifindex int) error
	FlushCaches(ctx context.Context) error
	// Restarted receives a value each time org.freedesktop.resolve1 gets a
	// new owner (resolved restarted, forgetting every link's settings) and
	// is closed by Close; nil if the implementation cannot tell.
	Restarted() <-chan struct{}
	Close() error
}

// Registry holds NRPT rules: the subkeys of
// HKLM\SYSTEM\CurrentControlSet\Services\Dnscache\Parameters\DnsPolicyConfig.
type Registry interface {
	Keys() ([]string, error)
	// SetKey creates the subkey (or replaces its values) with exactly these values.
	SetKey(name string, values []RegistryValue) error
	DeleteKey(name string) error
}

// Registry value types.
const (
	RegDWord    = "REG_DWORD"
	RegString   = "REG_SZ"
	RegMultiStr = "REG_MULTI_SZ"
)

// RegistryValue is one value under an NRPT rule key.
type RegistryValue struct {
	Name    string
	Type    string   // RegDWord, RegString or RegMultiStr
	DWord   uint32   // RegDWord
	Strings []string // RegString (one) or RegMultiStr
}
