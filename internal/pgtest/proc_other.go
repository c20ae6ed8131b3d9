//go:build !linux

package pgtest

import (
	"syscall"

	"github.com/runos/vpn/internal/pgserver"
)

// asUser: Require skips (or fails) before a server is started elsewhere.
func asUser(pgserver.Account) *syscall.SysProcAttr { return nil }
