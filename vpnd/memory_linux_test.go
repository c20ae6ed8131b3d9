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
// heap, where garbage and leaks land; not the binary's pages), once the
// rounds stop and the daemon has given back what it does not hold (its own
// trim after 2 s of quiet, vpnd/trim.go), must be back within heldKB of
// where it was before them. Measured so: 1.1–2.4 MiB over, with device
// reads in process (wghost/uapi.go) or through the UAPI socket alike.
//
// Right after the last round it is more, and how much more depends on how
// fast the rounds ran, not on what the daemon holds: garbage the GC is
// paced to allow (gcHeadroom, see gc.go) and pages freed but not yet
// returned. Through the socket (reads of ~0.5 ms) that was 2.0–2.8 MiB
// over round 10; in process (reads of ~20 µs, rounds faster) 3.6–17.5 MiB,
// and an assertion there failed CI with nothing held (2026-12-07): it is
// logged, not asserted. Before the GC pacing the same rounds grew it
// 13–17 MiB, on the way to ~25 MiB of garbage over wireguard-go's packet
// buffers. A peer kept per round would grow it without end (TestEngineReleasesRemovedPeers
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
		heldKB       = 4 << 10 // twice the most measured (see above)
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
	// The daemon's trim runs after 2 s of quiet (longer when it learnt
	// that quiet was short): wait for it, up to 30 s.
	settled := end
	for deadline := time.Now().Add(30 * time.Second); settled-connected > heldKB && time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		settled = l.memKB("RssAnon")
	}
	t.Logf("daemon RssAnon once quiet: %d KiB (%+d KiB over its level before the rounds)", settled, settled-connected)
	if settled-connected > heldKB {
		t.Errorf("the daemon's anonymous memory stayed %d KiB over its level before %d connect/disconnect rounds (allowed %d KiB): memory held per round",
			settled-connected, rounds, heldKB)
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
