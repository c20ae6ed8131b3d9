package vpnd

import (
	"context"
	"testing"
	"time"

	"github.com/runos/vpn/vpnd/store"
)

// The CLI's default cluster, given with a connect, is kept (and survives a
// restart); a connect that names none keeps it.
func TestDefaultClusterKept(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	dir := t.TempDir()
	td := startDaemon(t, w, dir)
	handOver(t, td, w, "tok1")
	if _, aerr := td.connectAs(context.Background(), "ky3", "xym"); aerr != nil {
		t.Fatal(aerr)
	}
	if _, aerr := td.connect(context.Background(), "xym"); aerr != nil {
		t.Fatal(aerr)
	}
	td.stop()
	p, err := store.Dir{Path: dir}.LoadPrefs()
	if err != nil {
		t.Fatal(err)
	}
	if p.DefaultCID != "xym" || len(p.Wanted) != 2 {
		t.Fatalf("prefs: default %q, wanted %v", p.DefaultCID, p.Wanted)
	}
}
