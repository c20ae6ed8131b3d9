//go:build !linux

package reach

import (
	"errors"
	"net"
	"net/netip"
)

// LinuxOS stands in on other systems: a VPN node runs Linux.
type LinuxOS struct{}

var errNotLinux = errors.New("forwarding into the cluster needs Linux (nftables, TPROXY)")

func (LinuxOS) Listen(string) (net.Listener, error)   { return nil, errNotLinux }
func (LinuxOS) Install(Ruleset, string) error         { return errNotLinux }
func (LinuxOS) Forwarding() (bool, error)             { return false, errNotLinux }
func (LinuxOS) Remove() error                         { return nil }
func (LinuxOS) Counters() (map[string]uint64, error)  { return nil, errNotLinux }
func (LinuxOS) ListenUDP(string) (UDPListener, error) { return nil, errNotLinux }
func (LinuxOS) ReplyConn(local, remote netip.AddrPort) (net.Conn, error) {
	return nil, errNotLinux
}
