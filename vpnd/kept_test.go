package vpnd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/cache"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestRestartWithoutControlUsesKeptMap: the daemon keeps the last map it
// applied (0600); restarted while control is down it configures both
// clusters from it at once and says per cluster that control is
// unreachable and which configuration is in use; once control answers,
// its map replaces the kept one and the note goes.
func TestRestartWithoutControlUsesKeptMap(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	dir := t.TempDir()
	td := startDaemon(t, w, dir)
	handOver(t, td, w, "tok1")
	for _, cid := range []string{"ky3", "xym"} {
		if _, aerr := td.connect(context.Background(), cid); aerr != nil {
			t.Fatal(aerr)
		}
	}
	eventually(t, "both up", func() bool { st := td.Status(); return cluster(st, "ky3").PeerUp && cluster(st, "xym").PeerUp })
	eventually(t, "the map kept with both", func() bool {
		e, ok, _ := cache.Load(dir)
		return ok && len(e.Map.Clusters) == 2
	})
	if fi, err := os.Stat(filepath.Join(dir, cache.File)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept map mode: %v %v", fi, err)
	}
	for _, c := range td.Status().Clusters {
		if c.Kept != nil {
			t.Errorf("%s says kept while control answers: %+v", c.CID, c.Kept)
		}
	}
	peers := peerKeys(td.eng.config())
	td.stop()

	w.fc.SetDown(true)
	td = startDaemon(t, w, dir)
	eventually(t, "both configured from the kept map", func() bool {
		return slices.Equal(peerKeys(td.eng.config()), peers) && cluster(td.Status(), "ky3").PeerUp && cluster(td.Status(), "xym").PeerUp
	})
	st := td.Status()
	for _, cid := range []string{"ky3", "xym"} {
		k := cluster(st, cid).Kept
		if k == nil || k.ConfigurationOf.IsZero() || !strings.HasPrefix(k.Message, "control unreachable since ") ||
			!strings.Contains(k.Message, "; using the configuration of ") {
			t.Errorf("%s while control is down: %+v", cid, k)
		}
	}

	w.fc.SetDown(false)
	eventually(t, "control's map replaces the kept one", func() bool {
		st := td.Status()
		return cluster(st, "ky3").Kept == nil && cluster(st, "xym").Kept == nil && st.Session.Error == ""
	})
	if !slices.Equal(peerKeys(td.eng.config()), peers) {
		t.Errorf("peers after control answered: %v, want %v", peerKeys(td.eng.config()), peers)
	}
}

// TestKeptMapEndsWithTheSession: restarted with control down, the kept
// configuration lasts only until the session's expiry (on the local
// clock); after a sign-out nothing is kept at all.
func TestKeptMapEndsWithTheSession(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	dir := t.TempDir()
	td := startDaemon(t, w, dir)
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	eventually(t, "ky3 up", func() bool { return cluster(td.Status(), "ky3").PeerUp })
	eventually(t, "the map kept", func() bool { _, ok, _ := cache.Load(dir); return ok })
	exp := td.Status().Session.ExpiresAt
	td.stop()

	w.fc.SetDown(true)
	td = startDaemon(t, w, dir)
	eventually(t, "ky3 from the kept map", func() bool { return cluster(td.Status(), "ky3").PeerUp })
	td.mu.Lock()
	td.clock = func() time.Time { return exp.Add(time.Second) }
	td.mu.Unlock()
	td.kickRead()
	eventually(t, "expired", func() bool { return td.Status().Session.State == localapi.SessionExpired })
	if err := td.settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cfg := td.eng.config(); len(cfg.Peers)+len(cfg.Routes) != 0 {
		t.Errorf("the kept configuration outlived the session: %+v", cfg)
	}
	td.stop()

	w.fc.SetDown(false)
	w.fc.AddSession("tok2", "alice@example.com", time.Hour)
	td = startDaemon(t, w, dir)
	handOver(t, td, w, "tok2")
	if _, aerr := td.endSession(context.Background()); aerr != nil {
		t.Fatal(aerr)
	}
	if _, ok, _ := cache.Load(dir); ok {
		t.Error("a map still kept after signing out")
	}
}

// TestKeptMapRemovalIsRetried: the kept map's removal at sign-out fails
// (a read-only or full disk); the applier keeps trying until it goes, and
// a restart in the meantime brings no tunnel back from it.
func TestKeptMapRemovalIsRetried(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	dir := t.TempDir()
	var failing atomic.Bool
	var tries atomic.Int32
	removeKept := func(d *daemon) {
		d.removeKept = func(dir string) error {
			tries.Add(1)
			if failing.Load() {
				return errors.New("injected: read-only file system")
			}
			return cache.Remove(dir)
		}
	}
	td := startDaemon(t, w, dir, removeKept)
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	eventually(t, "ky3 up", func() bool { return cluster(td.Status(), "ky3").PeerUp })
	eventually(t, "the map kept", func() bool { _, ok, _ := cache.Load(dir); return ok })

	failing.Store(true)
	if _, aerr := td.endSession(context.Background()); aerr != nil {
		t.Fatal(aerr)
	}
	eventually(t, "the removal tried again after failing", func() bool { return tries.Load() >= 2 })
	if _, ok, _ := cache.Load(dir); !ok {
		t.Fatal("the kept map went while its removal fails")
	}
	td.stop()

	// A start while the removal still fails: signed out, nothing restored.
	tries.Store(0)
	td = startDaemon(t, w, dir, removeKept)
	eventually(t, "the removal tried after the restart", func() bool { return tries.Load() >= 1 })
	if err := td.settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cfg := td.eng.config(); len(cfg.Peers)+len(cfg.Routes) != 0 {
		t.Errorf("a restart brought tunnels back from a map to be removed: %+v", cfg)
	}

	failing.Store(false)
	eventually(t, "the kept map removed once the disk lets it", func() bool {
		_, ok, _ := cache.Load(dir)
		return !ok
	})
}
