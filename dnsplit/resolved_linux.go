package dnsplit

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

const (
	resolve1Name = "org.freedesktop.resolve1"
	resolve1Path = dbus.ObjectPath("/org/freedesktop/resolve1")
	resolve1Mgr  = "org.freedesktop.resolve1.Manager."
)

// busResolved is Resolved over the system bus.
type busResolved struct {
	conn      *dbus.Conn
	obj       dbus.BusObject
	restarted chan struct{}
}

// dialResolved connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS, else
// the standard socket) with a connection of its own.
func dialResolved() (*busResolved, error) {
	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		return nil, fmt.Errorf("system bus: %w", err)
	}
	b := &busResolved{conn: conn, obj: conn.Object(resolve1Name, resolve1Path)}
	b.watchOwner()
	return b, nil
}

// watchOwner turns NameOwnerChanged for resolve1 with a new owner into a
// Restarted event. Without the match nothing is lost but the event: Set
// still works, a restart just goes unnoticed.
func (b *busResolved) watchOwner() {
	err := b.conn.AddMatchSignal(dbus.WithMatchSender("org.freedesktop.DBus"), dbus.WithMatchInterface("org.freedesktop.DBus"),
		dbus.WithMatchMember("NameOwnerChanged"), dbus.WithMatchArg(0, resolve1Name))
	if err != nil {
		return
	}
	sigs := make(chan *dbus.Signal, 8)
	b.conn.Signal(sigs)
	b.restarted = make(chan struct{}, 1)
	go func() {
		defer close(b.restarted)
		for s := range sigs { // closed when the connection closes
			if s.Name != "org.freedesktop.DBus.NameOwnerChanged" || len(s.Body) != 3 {
				continue
			}
			if name, _ := s.Body[0].(string); name != resolve1Name {
				continue
			}
			if owner, _ := s.Body[2].(string); owner == "" {
				continue // it went away; wait for it to come back
			}
			select {
			case b.restarted <- struct{}{}:
			default: // one pending event is as good as many
			}
		}
	}()
}

func (b *busResolved) Restarted() <-chan struct{} { return b.restarted }

func (b *busResolved) call(ctx context.Context, method string, args ...any) error {
	return b.obj.CallWithContext(ctx, method, 0, args...).Err
}

func (b *busResolved) Ping(ctx context.Context) error {
	return b.call(ctx, "org.freedesktop.DBus.Peer.Ping")
}

// linkAddress is resolve1's (iay): address family and raw bytes.
type linkAddress struct {
	Family  int32
	Address []byte
}

func (b *busResolved) SetLinkDNS(ctx context.Context, ifindex int, servers []netip.Addr) error {
	as := make([]linkAddress, 0, len(servers))
	for _, s := range servers {
		s = s.Unmap()
		fam := int32(unix.AF_INET6)
		if s.Is4() {
			fam = unix.AF_INET
		}
		as = append(as, linkAddress{Family: fam, Address: s.AsSlice()})
	}
	return b.call(ctx, resolve1Mgr+"SetLinkDNS", int32(ifindex), as)
}

// linkDomain is resolve1's (sb): a domain and whether it only routes.
type linkDomain struct {
	Domain      string
	RoutingOnly bool
}

func (b *busResolved) SetLinkDomains(ctx context.Context, ifindex int, routingOnly []string) error {
	ds := make([]linkDomain, 0, len(routingOnly))
	for _, d := range routingOnly {
		ds = append(ds, linkDomain{Domain: d, RoutingOnly: true})
	}
	return b.call(ctx, resolve1Mgr+"SetLinkDomains", int32(ifindex), ds)
}

func (b *busResolved) SetLinkDefaultRoute(ctx context.Context, ifindex int, enable bool) error {
	return b.call(ctx, resolve1Mgr+"SetLinkDefaultRoute", int32(ifindex), enable)
}

func (b *busResolved) RevertLink(ctx context.Context, ifindex int) error {
	return b.call(ctx, resolve1Mgr+"RevertLink", int32(ifindex))
}

func (b *busResolved) FlushCaches(ctx context.Context) error {
	return b.call(ctx, resolve1Mgr+"FlushCaches")
}

func (b *busResolved) Close() error { return b.conn.Close() }
