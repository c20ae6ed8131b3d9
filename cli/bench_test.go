package cli

import (
	"io"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// BenchmarkVPNStatus is one `runos vpn status` in process: the cobra tree,
// the config, one local API round trip over a unix socket and the table.
func BenchmarkVPNStatus(b *testing.B) {
	benchCommand(b, "vpn", "status")
}

// BenchmarkVPNStatusJSON is the same with --json.
func BenchmarkVPNStatusJSON(b *testing.B) {
	benchCommand(b, "vpn", "status", "--json")
}

func benchCommand(b *testing.B, args ...string) {
	d := newFakeDaemon(b)
	cfg := b.TempDir() + "/c.json"
	d.Set(func(st *localapi.Status) {
		st.Session = localapi.Session{State: localapi.SessionSignedIn, User: "alice@example.com", ExpiresAt: time.Now().Add(time.Hour)}
		for _, cid := range []string{"ky3", "xym"} {
			c := d.connecting(cid)
			c.PeerUp, c.State = true, localapi.ClusterConnected
			st.Clusters = append(st.Clusters, c)
		}
	})
	env := Env{
		Stdout: io.Discard, Stderr: io.Discard,
		Getenv: func(k string) string {
			return map[string]string{"RUNOS_VPND_SOCKET": d.socket, "RUNOS_CONFIG": cfg}[k]
		},
		IsTerminal: func(io.Writer) bool { return false },
	}
	b.ResetTimer()
	for b.Loop() {
		if code := Main(b.Context(), args, env); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}
