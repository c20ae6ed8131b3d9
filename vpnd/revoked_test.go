package vpnd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// TestRevokedDevice: control revokes the device; its long-poll answers,
// the daemon shows the session revoked (with when and what to run), takes
// every peer and route down, makes a new key at once, stays revoked across
// a restart, and the next sign-in registers the new key and brings back
// the clusters.
func TestRevokedDevice(t *testing.T) {
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
	oldPub := td.publicKey().String()
	keyBefore, _ := os.ReadFile(filepath.Join(dir, "device.key"))

	at := w.fc.RevokeDevice(oldPub)
	eventually(t, "revoked", func() bool {
		st := td.Status()
		if st.Session.State != localapi.SessionRevoked {
			return false
		}
		// The first status that says revoked already names the new key:
		// never the refused one beside it.
		if st.Tunnel.PublicKey == oldPub {
			t.Errorf("revoked status still shows the refused key %s", oldPub)
		}
		return true
	})
	// Status says so at once; the tunnel follows as the applier acts.
	if err := td.settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	td.kickRead()
	eventually(t, "the new key read back", func() bool { return td.Status().Tunnel.PublicKey == td.publicKey().String() })
	st := td.Status()
	if !st.Session.RevokedAt.Equal(at) || !strings.Contains(st.Session.Error, "removed from RunOS") || st.Session.User != "alice@example.com" {
		t.Errorf("session = %+v", st.Session)
	}
	if len(st.Warnings) != 1 || st.Warnings[0].Code != localapi.WarnDeviceRevoked || !strings.Contains(st.Warnings[0].Message, "runos vpn up") {
		t.Errorf("warnings = %+v", st.Warnings)
	}
	if cfg := td.eng.config(); len(cfg.Peers) != 0 || len(cfg.Routes) != 0 || len(cfg.Addresses) != 0 {
		t.Errorf("the tunnel still carries %+v", cfg)
	}
	for _, c := range st.Clusters {
		if c.State != localapi.ClusterDisconnected || !c.Wanted {
			t.Errorf("cluster after the revoke: %+v", c)
		}
	}
	newPub := td.publicKey().String()
	keyAfter, _ := os.ReadFile(filepath.Join(dir, "device.key"))
	if newPub == oldPub || string(keyAfter) == string(keyBefore) || st.Tunnel.PublicKey != "" && st.Tunnel.PublicKey != newPub {
		t.Errorf("key not replaced: %s → %s (tunnel %s)", oldPub, newPub, st.Tunnel.PublicKey)
	}
	if _, aerr := td.connect(context.Background(), "ky3"); aerr == nil || !strings.Contains(aerr.Error(), "removed from RunOS") {
		t.Errorf("connect while revoked: %v", aerr)
	}

	// A restart keeps saying so.
	td.stop()
	td = startDaemon(t, w, dir)
	if st := td.Status(); st.Session.State != localapi.SessionRevoked || !st.Session.RevokedAt.Equal(at) {
		t.Fatalf("after a restart: %+v", st.Session)
	}
	if td.publicKey().String() != newPub {
		t.Fatal("the restarted daemon went back to another key")
	}

	// Signing in again registers the new key; the wanted clusters return.
	w.fc.AddSession("tok2", "alice@example.com", time.Hour)
	st = handOver(t, td, w, "tok2")
	if st.Session.State != localapi.SessionSignedIn || !st.Session.RevokedAt.IsZero() {
		t.Fatalf("after signing in again: %+v", st.Session)
	}
	if _, ok := w.fc.Device(newPub); !ok {
		t.Fatal("the new key was not registered")
	}
	eventually(t, "both back", func() bool { st := td.Status(); return cluster(st, "ky3").PeerUp && cluster(st, "xym").PeerUp })
}

// A daemon that missed the revocation (it was not running) meets the
// refusal when it registers: it makes a new key and registers that.
func TestRevokedKeyReplacedAtSignIn(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	handOver(t, td, w, "tok1")
	old := td.publicKey().String()
	td.stop()
	w.fc.RevokeDevice(old)
	td = startDaemon(t, w, td.dir.Path)
	w.fc.AddSession("tok2", "alice@example.com", time.Hour)
	st := handOver(t, td, w, "tok2")
	if st.Session.State != localapi.SessionSignedIn || td.publicKey().String() == old {
		t.Fatalf("after signing in: %+v, key %s", st.Session, td.publicKey())
	}
	if _, ok := w.fc.Device(td.publicKey().String()); !ok {
		t.Fatal("the new key was not registered")
	}
}
