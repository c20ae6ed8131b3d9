//go:build !linux

package stream

import (
	"net"
	"time"
)

// setUserTimeout does nothing here: a vanished client is noticed when the
// kernel gives up retransmitting a heartbeat (control runs on Linux in
// production, where TCP_USER_TIMEOUT bounds it).
func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }

// peerDone cannot look without reading here: a client that went away is
// noticed when a write to it fails.
func peerDone(*net.TCPConn) bool { return false }
