//go:build !linux && !windows

package lab

import (
	"context"
	"errors"
	"net"
)

var errNoNetns = errors.New("the lab needs Linux network namespaces")

func dialIn(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	return nil, errNoNetns
}

func listenPacketIn(nsPath, network, addr string) (net.PacketConn, error) {
	return nil, errNoNetns
}
