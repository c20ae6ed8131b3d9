package dnsplit

// Recheck compares resolv.conf with what was written and re-applies it,
// keeping the network's new servers, when another program rewrote it.
func (m *resolvConfMode) Recheck() { m.check() }

// Recheck sets the tunnel link's servers and domains again: idempotent for
// systemd-resolved, and it puts them back if the link's settings were reset.
func (m *resolvedMode) Recheck() { m.reapply("the network changed") }
