package dnsplit

// Rechecker is a Configurator that can look again, now, at what the system
// did to its settings: the daemon calls Recheck after the network changed,
// since a DHCP client or a network manager may have rewritten the resolver
// (the watches see most of it, not all: a bind-mounted resolv.conf, a link
// reset in systemd-resolved).
type Rechecker interface {
	Recheck()
}
