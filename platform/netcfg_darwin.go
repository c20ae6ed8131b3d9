package platform

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
)

// OpenTunnelNet returns the TunnelNet of the utun interface named name,
// which must exist: addresses with ifconfig, routes with route.
func OpenTunnelNet(name string) (TunnelNet, error) {
	if !strings.HasPrefix(name, "utun") {
		return nil, fmt.Errorf("interface %s: macOS tunnels are utunN devices", name)
	}
	if _, err := net.InterfaceByName(name); err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	list := func() ([]netip.Prefix, error) { return InterfaceAddrs(name) }
	return newOpsNet(name, utunOps{name: name, run: execRunner, list: list}), nil
}

// execRunner runs a command for real.
func execRunner(argv []string) ([]byte, error) {
	return exec.Command(argv[0], argv[1:]...).CombinedOutput()
}

// DeleteInterface removes a left-over interface; a missing one is not an
// error. A utun device lives exactly as long as the file descriptor of the
// process that made it, so a crashed daemon leaves none behind and one that
// exists belongs to a live process: there is nothing to remove.
func DeleteInterface(name string) error { return nil }

// InterfaceExists reports whether an interface named name exists.
func InterfaceExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}
