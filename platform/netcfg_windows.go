package platform

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
)

// OpenTunnelNet returns the TunnelNet of the Wintun adapter named name,
// which must exist: addresses and routes with netsh, in the active store.
//
// netsh rather than winipcfg (golang.zx2c4.com/wireguard/windows): that
// module is on the proxy, but `go get` of it fails here because its
// requirement github.com/lxn/walk needs gopkg.in/Knetic/govaluate.v3, which
// the proxy refuses (403); only a replace directive in go.mod would work
// around it.
func OpenTunnelNet(name string) (TunnelNet, error) {
	if err := checkNetshName(name); err != nil {
		return nil, err
	}
	if _, err := net.InterfaceByName(name); err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	list := func() ([]netip.Prefix, error) { return interfaceAddrs(name) }
	return newOpsNet(name, netshOps{name: name, netsh: netshPath(), run: execRunner, list: list}), nil
}

// netshPath is netsh.exe in the system directory, never one found on PATH.
func netshPath() string {
	root := os.Getenv("SystemRoot")
	if root == "" {
		root = `C:\Windows`
	}
	return filepath.Join(root, "System32", "netsh.exe")
}

// DeleteInterface removes a left-over interface; a missing one is not an
// error. Wintun removes an adapter when the process that created it exits
// (it is a software device bound to its handle), so a crashed daemon leaves
// none behind.
func DeleteInterface(name string) error { return nil }

// InterfaceExists reports whether an interface named name exists.
func InterfaceExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}
