//go:build !windows

package lab

import (
	"context"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// dialIn dials addr from inside the network namespace at nsPath, from this
// process.
func dialIn(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(nsPath, func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// listenPacketIn opens a packet socket on addr inside the network
// namespace at nsPath, from this process.
func listenPacketIn(nsPath, network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := inNetns(nsPath, func() (err error) {
		pc, err = net.ListenPacket(network, addr)
		return err
	})
	return pc, err
}

// inNetns runs open inside the network namespace at nsPath: a socket
// belongs to the namespace of the thread that created it, so a locked
// thread enters the namespace, creates the socket and leaves. (Network
// namespaces, unlike mount namespaces, can be entered by one thread of a
// multithreaded process.)
func inNetns(nsPath string, open func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- err
			return
		}
		defer unix.Close(orig)
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("open %s: %w", nsPath, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("enter %s: %w", nsPath, err)
			return
		}
		err = open()
		// Back to our own namespace; if that fails, the thread stays locked
		// and dies with this goroutine instead of serving others in the
		// wrong namespace.
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}
