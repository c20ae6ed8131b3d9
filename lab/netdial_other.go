//go:build !linux && !windows

package lab

import (
	"context"
	"errors"
	"net"
)

func dialIn(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	return nil, errors.New("the lab needs Linux network namespaces")
}
