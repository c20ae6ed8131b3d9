package dnsplit

import (
	"errors"
	"log/slog"
	"net/netip"
	"time"
)

// The modes Status reports.
const (
	ModeResolved      = "systemd-resolved" // Linux: per-link DNS on the tunnel over D-Bus
	ModeResolvConf    = "resolv.conf"      // Linux: resolv.conf fronted by the built-in forwarder
	ModeResolverFiles = "resolver-files"   // macOS: /etc/resolver/<domain>
	ModeNRPT          = "nrpt"             // Windows: Name Resolution Policy Table rules
	ModeOff           = "off"              // nothing is changed
)

// DefaultListenAddr is where the built-in forwarder listens in resolv.conf
// mode: a loopback address of its own, so it never collides with a local
// resolver on 127.0.0.1 or systemd-resolved's stub on 127.0.0.53.
// resolv.conf cannot name a port, hence :53.
var DefaultListenAddr = netip.MustParseAddrPort("127.0.80.53:53")

// Options configures New. Only Interface, StateDir and Logger are needed in
// production; the rest are seams for tests and defaults for odd machines.
type Options struct {
	Interface string       // the tunnel, e.g. wg1 (its link index for systemd-resolved)
	StateDir  string       // where changes are recorded before they are made
	Logger    *slog.Logger // nil: discard

	// Mode forces a mode instead of detecting one (""): ModeOff turns split
	// DNS off; a mode this OS does not have is an error.
	Mode string
	// ResolvConf is the resolver file (default /etc/resolv.conf).
	ResolvConf string
	// ListenAddr is the forwarder's address in resolv.conf mode (default
	// DefaultListenAddr). A port other than 53 only makes sense in tests.
	ListenAddr netip.AddrPort
	// ResolverDir is macOS's per-domain resolver directory (default /etc/resolver).
	ResolverDir string
	// Resolved talks to systemd-resolved; nil dials the system bus.
	Resolved Resolved
	// Registry holds the NRPT rule keys; nil uses the Windows registry.
	Registry Registry
	// InterfaceIndex resolves Interface to its link index; nil asks the kernel.
	InterfaceIndex func(name string) (int, error)
	// InterfaceAddr is Interface's own address (the device's tunnel
	// address), where systemd-resolved mode serves its splitter; nil asks
	// the kernel.
	InterfaceAddr func(name string) (netip.Addr, error)
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

func (o *Options) fill() error {
	if o.StateDir == "" {
		return errors.New("dnsplit: no state directory to record changes in")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ResolvConf == "" {
		o.ResolvConf = "/etc/resolv.conf"
	}
	if !o.ListenAddr.IsValid() {
		o.ListenAddr = DefaultListenAddr
	}
	if o.ResolverDir == "" {
		o.ResolverDir = "/etc/resolver"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// New picks the mode for this machine (or the one Options.Mode forces),
// logs one line saying which and why, and returns its configurator. It first
// undoes whatever an earlier run left recorded in StateDir, so a change is
// never stacked on top of a stale one. A machine where split DNS cannot work
// gets ModeOff with the reason, not an error: the tunnel is still useful by
// address.
func New(opt Options) (Configurator, error) {
	if err := opt.fill(); err != nil {
		return nil, err
	}
	if err := Cleanup(opt.StateDir, opt.Logger); err != nil {
		// Keep going: what could not be undone stays recorded and the
		// journal is appended to, never overwritten.
		opt.Logger.Warn("dns: clean-up of an earlier run incomplete", "err", err)
	}
	c, mode, reason, err := newPlatform(opt)
	if err != nil {
		return nil, err
	}
	opt.Logger.Info("dns: mode "+mode, "mode", mode, "reason", reason)
	return c, nil
}

// Cleanup undoes whatever is recorded in stateDir (after a crash, a kill -9,
// or when the system service stops the daemon): the original resolv.conf
// restored byte for byte, the tunnel's link reverted in systemd-resolved,
// resolver files and NRPT keys removed. A change that cannot be undone stays
// recorded and is reported; nothing recorded is a no-op.
func Cleanup(stateDir string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return cleanup(stateDir, log, platformUndoers(log))
}
