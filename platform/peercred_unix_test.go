//go:build linux || darwin

package platform

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestPeerCredOfSelf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cred, err := PeerCredOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if cred.UID != os.Getuid() || cred.Admin != (os.Getuid() == 0) {
		t.Errorf("cred %+v, want uid %d", cred, os.Getuid())
	}
	if cred.PID != os.Getpid() {
		t.Errorf("cred pid %d, want %d", cred.PID, os.Getpid())
	}
	if _, err := PeerCredOf(fakeConn{}); err == nil {
		t.Error("PeerCredOf(non-socket): no error")
	}
}

type fakeConn struct{ net.Conn }
