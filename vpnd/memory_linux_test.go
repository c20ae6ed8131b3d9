package vpnd

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// TestDaemonMemoryFlat: connecting and disconnecting a cluster over and
// over must not grow the daemon. Its anonymous resident memory (the Go
// heap, where garbage and leaks land; not the binary's pages) may grow from
// round 10 to round 50 by no more than the garbage the GC is paced to
// allow (gcHeadroom, see gc.go) and 2 MiB of pages the allocator scatters
// it over. Measured here: 2.7–5.7 MiB with the pacing; 13–17 MiB with Go's
// default GOGC=100 (GOGC=100 in the environment brings that back), on the
// way to ~25 MiB of garbage over wireguard-go's packet buffers. A peer
// kept per round would grow it without end (TestEngineReleasesRemovedPeers
// in vpnd/tunnel checks the live heap itself).
//
// The daemon measured is the real `runos vpnd`, built as it ships: not this
// test binary, which `make test` builds with -race, whose runtime maps
// shadow memory for every heap address it ever touched and keeps it, so
// its RssAnon grows with heap churn that the real daemon returns (CI saw
// 12 MiB of growth that way).
func TestDaemonMemoryFlat(t *testing.T) {
	const (
		warm, rounds = 10, 50
		allowedKB    = (gcHeadroom + 2<<20) >> 10
	)
	l := newLab(t)
	l.bin = buildRunos(t)
	l.start()
	l.signIn(t)
	ctx := context.Background()
	for _, cid := range []string{"ky3", "xym"} {
		if _, err := l.client.Connect(ctx, cid); err != nil {
			t.Fatal(err)
		}
	}
	l.waitStatus("both up", func(st *localapi.Status) bool { return peerUp("ky3")(st) && peerUp("xym")(st) })
	xym := l.servers["xym/n1"]
	connected := l.memKB("RssAnon")
	var atWarm int
	for i := 1; i <= rounds; i++ {
		if _, err := l.client.Disconnect(ctx, "xym"); err != nil {
			t.Fatal(err)
		}
		l.waitStatus("xym disconnected", func(st *localapi.Status) bool {
			return cluster(*st, "xym").State == localapi.ClusterDisconnected
		})
		// The fake control tells the gateway in the background: let the
		// leave land on the server before the next join (and let the
		// server's flood protection pass, see handshakeSpacing).
		for deadline := time.Now().Add(10 * time.Second); len(xym.Peers()) != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the xym server kept the device after the leave")
			}
		}
		time.Sleep(handshakeSpacing)
		if _, err := l.client.Connect(ctx, "xym"); err != nil {
			t.Fatal(err)
		}
		l.waitStatus("xym up again", peerUp("xym"))
		if i == warm {
			atWarm = l.memKB("RssAnon")
		}
	}
	end := l.memKB("RssAnon")
	t.Logf("daemon RssAnon: %d KiB connected, %d KiB after %d rounds, %d KiB after %d (VmRSS %d KiB)",
		connected, atWarm, warm, end, rounds, l.rssKB())
	if connected < 0 || atWarm < 0 || end < 0 {
		t.Fatal("cannot read the daemon's memory")
	}
	if grew := end - atWarm; grew > allowedKB {
		t.Errorf("the daemon's anonymous memory grew %d KiB from round %d to %d (allowed %d KiB): memory held per connect/disconnect",
			grew, warm, rounds, allowedKB)
	}
}

// buildRunos builds the runos program as `make build` does (no race
// detector, no test code) into the test's temporary directory.
func buildRunos(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "runos")
	out, err := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/runos/vpn/cmd/runos").CombinedOutput()
	if err != nil {
		t.Fatalf("build runos: %v\n%s", err, out)
	}
	return bin
}
