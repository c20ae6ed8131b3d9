package vpnd

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/runos/vpn/vpnd/access"
)

// serve runs the local API of d on a unix socket in dir.
func serve(t *testing.T, d *daemon, dir string, pol access.Policy) string {
	t.Helper()
	sock := filepath.Join(dir, "vpnd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o666)
	done := make(chan struct{})
	srv := &http.Server{Handler: (&server{d: d, policy: pol, done: done}).handler(), ConnContext: connContext}
	go srv.Serve(ln)
	t.Cleanup(func() { close(done); srv.Close() })
	return sock
}
