package reach

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// UDPIdle ends a UDP flow that carried nothing either way this long.
const UDPIdle = 60 * time.Second

// UDPListener is a transparent UDP socket: every datagram TPROXY hands it,
// with the address the device sent it to.
type UDPListener interface {
	ReadFrom(b []byte) (n int, src, dst netip.AddrPort, err error)
	Port() int
	Close() error
}

// udpFlow is one device's flow to one address: the node's socket to the
// target, and the socket that answers the device from the address it sent
// to (transparent, connected to the device, so the flow's next datagrams
// reach it directly).
type udpFlow struct {
	up, reply net.Conn
}

// serveUDP relays the flows of one listener until it is closed.
func (f *Forwarder) serveUDP(ln UDPListener) {
	defer f.wg.Done()
	var mu sync.Mutex
	flows := map[[2]netip.AddrPort]*udpFlow{}
	var running sync.WaitGroup
	defer running.Wait()
	buf := make([]byte, 64<<10)
	for {
		n, src, dst, err := ln.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				mu.Lock()
				for _, fl := range flows {
					fl.up.Close()
					fl.reply.Close()
				}
				mu.Unlock()
				return
			}
			continue
		}
		key := [2]netip.AddrPort{src, dst}
		mu.Lock()
		fl := flows[key]
		mu.Unlock()
		if fl == nil {
			if fl = f.openFlow(src, dst); fl == nil {
				continue
			}
			mu.Lock()
			flows[key] = fl
			mu.Unlock()
			running.Add(2)
			end := func() {
				fl.up.Close()
				fl.reply.Close()
				mu.Lock()
				if flows[key] == fl {
					delete(flows, key)
				}
				mu.Unlock()
			}
			go func() { defer running.Done(); copyDatagrams(fl.reply, fl.up); end() }()
			go func() { defer running.Done(); copyDatagrams(fl.up, fl.reply); end() }()
		}
		_, _ = fl.up.Write(buf[:n])
	}
}

// openFlow dials the flow's target from the node and opens the socket that
// answers the device; nil (logged) when either fails.
func (f *Forwarder) openFlow(src, dst netip.AddrPort) *udpFlow {
	target, err := f.spec.Load().Target(dst)
	if err != nil {
		f.log.Info("forwarding refused", "from", src.String(), "to", dst.String(), "proto", "udp", "err", err)
		return nil
	}
	up, err := f.dial(f.ctx, "udp4", target.String())
	if err != nil {
		f.log.Info("forwarding: cannot reach the target", "from", src.String(), "to", dst.String(), "target", target.String(), "err", err)
		return nil
	}
	reply, err := f.os.ReplyConn(dst, src)
	if err != nil {
		up.Close()
		f.log.Warn("forwarding: cannot answer the device", "from", src.String(), "to", dst.String(), "err", err)
		return nil
	}
	f.log.Debug("forwarding", "from", src.String(), "to", dst.String(), "target", target.String(), "proto", "udp")
	return &udpFlow{up: up, reply: reply}
}

// copyDatagrams copies datagrams from src to dst until src is idle for
// UDPIdle or either fails.
func copyDatagrams(dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		_ = src.SetReadDeadline(time.Now().Add(UDPIdle))
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}
