//go:build linux

package netnstest

import "testing"

func TestLinkPings(t *testing.T) {
	Require(t, "ip", "ping")
	a, b := New(t, "a"), New(t, "b")
	Link(t, a, "eth0", "192.0.2.1/24", b, "eth0", "192.0.2.2/24")
	a.MustExec("ping", "-c1", "-W2", "192.0.2.2")
}
