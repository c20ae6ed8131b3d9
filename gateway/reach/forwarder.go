package reach

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// OS is what the forwarder changes on the node (per-OS files; tests of the
// logic inject a fake).
type OS interface {
	// Listen opens a transparent TCP listener for network (tcp4, tcp6) on
	// a free port: it accepts connections to any address TPROXY hands it.
	Listen(network string) (net.Listener, error)
	// Install puts the ruleset in place (replacing any before it) with the
	// policy routing that delivers marked packets locally, and the route
	// of the devices' IPv6 addresses through iface.
	Install(rs Ruleset, iface string) error
	// Remove takes the ruleset and the routing away.
	Remove() error
	// Counters reads the drop counters (packets) by reason.
	Counters() (map[string]uint64, error)
	// ListenUDP opens a transparent UDP listener for network (udp4, udp6)
	// on a free port.
	ListenUDP(network string) (UDPListener, error)
	// Forwarding reports whether the node forwards IPv4 packets
	// (net.ipv4.ip_forward): ICMP echo into the cluster needs it.
	Forwarding() (bool, error)
	// ReplyConn opens a UDP socket bound (transparently) to local and
	// connected to remote: a flow's answers leave from the address the
	// device sent to.
	ReplyConn(local, remote netip.AddrPort) (net.Conn, error)
}

// DialTimeout bounds the node's connection to the target.
const DialTimeout = 10 * time.Second

// Forwarder relays devices' connections into the cluster for as long as
// the node serves. Apply and Close may be called from one goroutine;
// Dropped from any.
type Forwarder struct {
	os  OS
	log *slog.Logger

	spec   atomic.Pointer[Spec]
	ls     []net.Listener
	uls    []UDPListener
	ports  Ports
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	rules  string // installed (Ruleset.String); "" when none
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

// New returns a forwarder that is off until the first Apply with prefixes.
func New(os OS, log *slog.Logger) *Forwarder {
	d := &net.Dialer{Timeout: DialTimeout}
	return &Forwarder{os: os, log: log, dial: d.DialContext}
}

// Apply makes the node forward what s says; a spec with no prefixes turns
// forwarding off.
func (f *Forwarder) Apply(s Spec) error {
	if !s.Enabled() {
		return f.Close()
	}
	f.spec.Store(&s)
	if f.ls == nil {
		if err := f.listen(); err != nil {
			return err
		}
	}
	rs := Rules(s, f.ports)
	rules := rs.String()
	if rules == f.rules {
		return nil
	}
	if err := f.os.Install(rs, s.Interface); err != nil {
		return err
	}
	if f.rules == "" {
		f.log.Info("forwarding into the cluster", "prefixes", s.Prefixes, "mapped", s.Mapped, "interface", s.Interface)
		// The node's TCP and UDP are its own connections, but echo requests
		// are forwarded: a Kubernetes node forwards, a bare host may not.
		if on, err := f.os.Forwarding(); err != nil {
			f.log.Warn("ping into the cluster needs IPv4 forwarding on this node; cannot read net.ipv4.ip_forward", "err", err)
		} else if !on {
			f.log.Warn("ping into the cluster needs IPv4 forwarding on this node (net.ipv4.ip_forward=1); TCP and UDP do not")
		}
	}
	f.log.Debug("forwarding rules installed", "ruleset", rules)
	f.rules = rules
	return nil
}

func (f *Forwarder) listen() error {
	f.ctx, f.cancel = context.WithCancel(context.Background())
	for _, l := range []struct {
		network string
		port    *int
	}{{"tcp4", &f.ports.TCP4}, {"tcp6", &f.ports.TCP6}} {
		ln, err := f.os.Listen(l.network)
		if err != nil {
			f.closeListeners()
			return err
		}
		f.ls = append(f.ls, ln)
		*l.port = ln.Addr().(*net.TCPAddr).Port
		f.wg.Add(1)
		go f.accept(ln)
	}
	for _, l := range []struct {
		network string
		port    *int
	}{{"udp4", &f.ports.UDP4}, {"udp6", &f.ports.UDP6}} {
		ln, err := f.os.ListenUDP(l.network)
		if err != nil {
			f.closeListeners()
			return err
		}
		f.uls = append(f.uls, ln)
		*l.port = ln.Port()
		f.wg.Add(1)
		go f.serveUDP(ln)
	}
	return nil
}

// Close stops forwarding: rules, routes and listeners go; connections
// already relayed are cut.
func (f *Forwarder) Close() error {
	var err error
	if f.rules != "" {
		err = f.os.Remove()
		f.rules = ""
		f.log.Info("forwarding into the cluster stopped")
	}
	f.closeListeners()
	f.spec.Store(nil)
	return err
}

func (f *Forwarder) closeListeners() {
	if f.cancel != nil {
		f.cancel()
	}
	for _, ln := range f.ls {
		_ = ln.Close()
	}
	for _, ln := range f.uls {
		_ = ln.Close()
	}
	f.wg.Wait()
	f.ls, f.uls, f.ports = nil, nil, Ports{}
}

// Dropped reads the drop counters (nil when not forwarding).
func (f *Forwarder) Dropped() map[string]uint64 {
	if f.spec.Load() == nil {
		return nil
	}
	c, err := f.os.Counters()
	if err != nil {
		return nil
	}
	return c
}

func (f *Forwarder) accept(ln net.Listener) {
	defer f.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			f.log.Warn("forwarding: accept", "err", err)
			continue
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			f.relay(c)
		}()
	}
}

// relay connects a device's connection to its target and copies both ways
// until both sides are done (or the forwarder closes).
func (f *Forwarder) relay(c net.Conn) {
	defer c.Close()
	dst := c.LocalAddr().(*net.TCPAddr).AddrPort()
	src := c.RemoteAddr().String()
	target, err := f.spec.Load().Target(dst)
	if err != nil {
		f.log.Info("forwarding refused", "from", src, "to", dst.String(), "err", err)
		return
	}
	up, err := f.dial(f.ctx, "tcp4", target.String())
	if err != nil {
		f.log.Info("forwarding: cannot reach the target", "from", src, "to", dst.String(), "target", target.String(), "err", err)
		return
	}
	defer up.Close()
	f.log.Debug("forwarding", "from", src, "to", dst.String(), "target", target.String())
	stop := context.AfterFunc(f.ctx, func() { c.Close(); up.Close() })
	defer stop()
	done := make(chan struct{})
	go func() {
		pipe(up, c)
		close(done)
	}()
	pipe(c, up)
	<-done
}

// pipe copies from src to dst, then half-closes dst's write side so the
// other end sees the end of the stream.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
}
