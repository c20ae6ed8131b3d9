// Package netmon tells the daemon when the laptop's network changes: its
// default route (which uplink, through which router) or its addresses, as
// when it moves from one Wi-Fi to another, from Wi-Fi to a phone's hotspot
// or to a wired dock. Each OS reports changes its own way (Linux: netlink's
// address, route and link notifications, the state read back with
// vishvananda/netlink; macOS: the routing socket; Windows: the IP Helper
// notifications through winipcfg), always as a hint that
// something may have changed; the common part here re-reads the state,
// waits for a burst of hints to settle and reports a Change only when the
// state differs, leaving out the tunnel's own interface so that the
// daemon's routes and addresses never report themselves.
//
// It is not for the daemon's own changes, DNS (dnsplit watches resolver
// files) or sleep (vpnd/wake): only the uplink.
package netmon

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Route is a default route.
type Route struct {
	Iface   string
	Gateway netip.Addr // invalid for a point-to-point default
	MTU     int        // the interface's MTU (0 unknown)
}

// Addr is an address of an interface.
type Addr struct {
	Iface string
	Addr  netip.Prefix
	MTU   int // the interface's MTU (0 unknown)
}

// State is what the monitor watches.
type State struct {
	Default []Route // IPv4 first, then IPv6; sorted
	Addrs   []Addr  // global unicast addresses; sorted
}

// MTU is the smallest MTU of the interfaces the laptop has addresses on
// (the tunnel's datagrams leave by one of them; which one depends on the
// node), 0 when none is known. It is the daemon's fallback where the route
// to a VPN server cannot be looked up (RouteMTU): it counts every
// interface, another VPN's too.
func (s State) MTU() int {
	m := 0
	for _, a := range s.Addrs {
		if a.MTU > 0 && (m == 0 || a.MTU < m) {
			m = a.MTU
		}
	}
	for _, r := range s.Default {
		if r.MTU > 0 && (m == 0 || r.MTU < m) {
			m = r.MTU
		}
	}
	return m
}

// Equal reports whether two states are the same.
func (s State) Equal(o State) bool {
	return slices.Equal(s.Default, o.Default) && slices.Equal(s.Addrs, o.Addrs)
}

// String is the state in one line, for logs.
func (s State) String() string {
	var parts []string
	for _, r := range s.Default {
		p := "default"
		if r.Gateway.IsValid() {
			p += " via " + r.Gateway.String()
		}
		parts = append(parts, fmt.Sprintf("%s dev %s mtu %d", p, r.Iface, r.MTU))
	}
	if len(parts) == 0 {
		parts = append(parts, "no default route")
	}
	var as []string
	for _, a := range s.Addrs {
		as = append(as, a.Addr.String()+"@"+a.Iface)
	}
	if len(as) == 0 {
		as = append(as, "none")
	}
	return strings.Join(parts, ", ") + "; addresses " + strings.Join(as, " ")
}

// Change is a change of the state.
type Change struct {
	Old, New State
}

// source is the per-OS part: it reads the state as it is and hints that
// it may have changed.
type source interface {
	read() (State, error)
	hints() <-chan struct{}
	close() error
}

// Options configure New.
type Options struct {
	// Ignore names interfaces left out of the state: the tunnel.
	Ignore func(iface string) bool
	Log    *slog.Logger
	// Settle is how long hints must stop before the state is re-read
	// (a change comes as a burst: link, addresses, routes); 0: 50 ms.
	Settle time.Duration
	// Recheck re-reads the state this often even without a hint (a missed
	// notification is not fatal); 0: 30 s.
	Recheck time.Duration

	src source // tests; nil: the OS's
}

// Monitor follows the network and reports each Change.
type Monitor struct {
	opt     Options
	src     source
	changes chan Change
	done    chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	state State
}

// New starts a monitor; its first state is read at once.
func New(opt Options) (*Monitor, error) {
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.Ignore == nil {
		opt.Ignore = func(string) bool { return false }
	}
	if opt.Settle == 0 {
		opt.Settle = 50 * time.Millisecond
	}
	if opt.Recheck == 0 {
		opt.Recheck = 30 * time.Second
	}
	src := opt.src
	if src == nil {
		var err error
		if src, err = newSource(); err != nil {
			return nil, fmt.Errorf("network monitor: %w", err)
		}
	}
	m := &Monitor{opt: opt, src: src, changes: make(chan Change, 16), done: make(chan struct{})}
	st, err := m.read()
	if err != nil {
		_ = src.close()
		return nil, fmt.Errorf("network monitor: read the network: %w", err)
	}
	m.state = st
	m.wg.Add(1)
	go m.loop()
	return m, nil
}

// Changes delivers each change of the state, in order. A reader that falls
// far behind loses the oldest (each Change carries the whole new state).
func (m *Monitor) Changes() <-chan Change { return m.changes }

// State is the state as last read.
func (m *Monitor) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// Close stops the monitor.
func (m *Monitor) Close() error {
	close(m.done)
	err := m.src.close()
	m.wg.Wait()
	return err
}

func (m *Monitor) read() (State, error) {
	st, err := m.src.read()
	if err != nil {
		return State{}, err
	}
	return normalize(st, m.opt.Ignore), nil
}

// normalize leaves out ignored interfaces and sorts.
func normalize(st State, ignore func(string) bool) State {
	var out State
	for _, r := range st.Default {
		if !ignore(r.Iface) {
			out.Default = append(out.Default, r)
		}
	}
	for _, a := range st.Addrs {
		if !ignore(a.Iface) {
			out.Addrs = append(out.Addrs, a)
		}
	}
	slices.SortFunc(out.Default, func(a, b Route) int {
		if a.Gateway.Is4() != b.Gateway.Is4() {
			if a.Gateway.Is4() {
				return -1
			}
			return 1
		}
		if c := strings.Compare(a.Iface, b.Iface); c != 0 {
			return c
		}
		return a.Gateway.Compare(b.Gateway)
	})
	slices.SortFunc(out.Addrs, func(a, b Addr) int {
		if c := a.Addr.Addr().Compare(b.Addr.Addr()); c != 0 {
			return c
		}
		return strings.Compare(a.Iface, b.Iface)
	})
	return out
}

func (m *Monitor) loop() {
	defer m.wg.Done()
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	recheck := time.NewTicker(m.opt.Recheck)
	defer recheck.Stop()
	for {
		select {
		case <-m.done:
			return
		case _, ok := <-m.src.hints():
			if !ok {
				return
			}
			settle.Reset(m.opt.Settle) // a burst: wait for its end
			continue
		case <-settle.C:
		case <-recheck.C:
		}
		st, err := m.read()
		if err != nil {
			m.opt.Log.Warn("network monitor: read the network", "err", err)
			continue
		}
		m.mu.Lock()
		old := m.state
		m.state = st
		m.mu.Unlock()
		if old.Equal(st) {
			continue
		}
		m.opt.Log.Info("network changed", "from", old.String(), "to", st.String())
		select {
		case m.changes <- Change{Old: old, New: st}:
		default: // full: make room, keeping the newest
			select {
			case <-m.changes:
			default:
			}
			m.changes <- Change{Old: old, New: st}
		}
	}
}
