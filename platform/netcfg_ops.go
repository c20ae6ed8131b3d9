package platform

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// opsNet is the TunnelNet of macOS and Windows: the diffing and the
// bookkeeping of which routes are ours, over netOps that make the single
// changes (ifconfig and route on macOS, winipcfg on Windows). This part
// compiles and is tested on every OS; only the ops are per OS.
//
// Addresses are diffed against what the interface has. Routes are diffed
// against the routes this opsNet added: the tunnel interface dies with the
// daemon on both OSes (utun with its file descriptor, Wintun with its
// session), so no route of ours outlives it, and a route someone else added
// through the interface is never touched.
type opsNet struct {
	name string
	ops  netOps

	mu     sync.Mutex
	routes map[netip.Prefix]bool // the routes this opsNet added
}

// netOps make single changes to one interface. The errors carry what was
// run and what the OS said; opsNet adds which change it was.
type netOps interface {
	up() error
	// addrs lists the interface's addresses now.
	addrs() ([]netip.Prefix, error)
	addAddress(p netip.Prefix) error
	// delAddress and delRoute return an error wrapping errGone when there
	// was nothing to delete.
	delAddress(p netip.Prefix) error
	addRoute(p netip.Prefix) error
	delRoute(p netip.Prefix) error
}

// errGone says a delete found nothing to delete: the address or route
// went already (with a flapping interface, or by someone else's hand),
// which is what the delete wanted.
var errGone = errors.New("already gone")

func newOpsNet(name string, ops netOps) *opsNet {
	return &opsNet{name: name, ops: ops, routes: map[netip.Prefix]bool{}}
}

func (n *opsNet) Up() error {
	if err := n.ops.up(); err != nil {
		return fmt.Errorf("set %s up: %w", n.name, err)
	}
	return nil
}

func (n *opsNet) SetAddresses(addrs []netip.Prefix) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	have, err := n.ops.addrs()
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", n.name, err)
	}
	have = slices.DeleteFunc(slices.Clone(have), func(p netip.Prefix) bool {
		return p.Addr().IsLinkLocalUnicast() // the OS's own fe80:: (or 169.254/16) address
	})
	add, del := diffPrefixes(have, addrs)
	// New addresses first, so a change of address never leaves none.
	for _, p := range add {
		if err := n.ops.addAddress(p); err != nil {
			return fmt.Errorf("add address %s to %s: %w", p, n.name, err)
		}
	}
	for _, p := range del {
		if err := n.ops.delAddress(p); err != nil && !errors.Is(err, errGone) {
			return fmt.Errorf("remove address %s from %s: %w", p, n.name, err)
		}
	}
	return nil
}

func (n *opsNet) SetRoutes(routes []netip.Prefix) error {
	want := make([]netip.Prefix, 0, len(routes))
	for _, r := range routes {
		want = append(want, r.Masked())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	ours := make([]netip.Prefix, 0, len(n.routes))
	for p := range n.routes {
		ours = append(ours, p)
	}
	slices.SortFunc(ours, netip.Prefix.Compare) // map order is random; the deletes' is not
	add, del := diffPrefixes(ours, want)
	var errs []error
	for _, p := range del {
		if err := n.ops.delRoute(p); err != nil && !errors.Is(err, errGone) {
			errs = append(errs, fmt.Errorf("remove route %s via %s: %w", p, n.name, err)) // still ours: the next call tries again
			continue
		}
		delete(n.routes, p)
	}
	for _, p := range add {
		if err := n.ops.addRoute(p); err != nil {
			errs = append(errs, fmt.Errorf("add route %s via %s: %w", p, n.name, err))
			continue
		}
		n.routes[p] = true
	}
	return errors.Join(errs...)
}

// diffPrefixes says what to add to have and remove from it to get want,
// each in a stable order (want's, then have's), without duplicates.
func diffPrefixes(have, want []netip.Prefix) (add, del []netip.Prefix) {
	in := func(ps []netip.Prefix, p netip.Prefix) bool { return slices.Contains(ps, p) }
	for _, p := range want {
		if !in(have, p) && !in(add, p) {
			add = append(add, p)
		}
	}
	for _, p := range have {
		if !in(want, p) && !in(del, p) {
			del = append(del, p)
		}
	}
	return add, del
}
