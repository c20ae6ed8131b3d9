package cache

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/store"
)

func sample() Entry {
	return Entry{Control: "https://control.example", User: "alice@example.com", DeviceID: "d1",
		ReceivedAt: time.Date(2026, 12, 4, 17, 0, 0, 0, time.UTC),
		Map: api.DeviceMap{Version: 7, Device: api.Device{ID: "d1", Address: "100.96.0.2"},
			Session:  api.SessionInfo{ExpiresAt: time.Date(2026, 12, 5, 17, 0, 0, 0, time.UTC)},
			Clusters: []api.ClusterConfig{{CID: "ky3", Name: "tc3-ky3"}, {CID: "xym"}}}}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := Load(dir); ok || err != nil {
		t.Fatalf("nothing kept yet: ok %v, %v", ok, err)
	}
	want := sample()
	if err := Save(dir, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, File))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v: want 0600", fi.Mode().Perm(), err)
	}
	got, ok, err := Load(dir)
	if err != nil || !ok || got.Map.Version != 7 || len(got.Map.Clusters) != 2 || !got.ReceivedAt.Equal(want.ReceivedAt) {
		t.Fatalf("loaded %+v %v %v", got, ok, err)
	}
	if !got.Matches(store.Prefs{APIURL: want.Control, User: want.User, DeviceID: "d1"}) {
		t.Error("does not match its own session")
	}
	for _, p := range []store.Prefs{
		{APIURL: "https://other.example", User: want.User, DeviceID: "d1"},
		{APIURL: want.Control, User: "bob@example.com", DeviceID: "d1"},
		{APIURL: want.Control, User: want.User, DeviceID: "d2"},
		{APIURL: want.Control, User: want.User},
	} {
		if got.Matches(p) {
			t.Errorf("matches another session %+v", p)
		}
	}
	if err := Remove(dir); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := Load(dir); ok {
		t.Error("still kept after Remove")
	}
	if err := Remove(dir); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
}

func TestCorruptFileIsRemoved(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, File)
	if err := os.WriteFile(p, []byte(`{"control":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := Load(dir); ok || err == nil || !strings.Contains(err.Error(), "removed it") {
		t.Fatalf("a torn file: ok %v, %v", ok, err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("the torn file is still there: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	good, _ := json.Marshal(sample())
	if _, err := Parse(good); err != nil {
		t.Fatalf("a good file: %v", err)
	}
	for name, mut := range map[string]func(*Entry){
		"no control":        func(e *Entry) { e.Control = "" },
		"no device":         func(e *Entry) { e.DeviceID = "" },
		"no time":           func(e *Entry) { e.ReceivedAt = time.Time{} },
		"another device":    func(e *Entry) { e.Map.Device.ID = "d9" },
		"a bad cid":         func(e *Entry) { e.Map.Clusters[0].CID = "../etc" },
		"a cluster twice":   func(e *Entry) { e.Map.Clusters[1].CID = "ky3" },
		"too many clusters": func(e *Entry) { e.Map.Clusters = make([]api.ClusterConfig, maxClusters+1) },
	} {
		e := sample()
		mut(&e)
		b, _ := json.Marshal(e)
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Parse(append(good, good...)); err == nil {
		t.Error("two values accepted")
	}
	if _, err := Parse(make([]byte, MaxSize+1)); err == nil {
		t.Error("an oversized file accepted")
	}
}

// FuzzParse: whatever is on disk, Parse returns an error or an entry that
// passes its own checks again after a round trip, and never panics.
func FuzzParse(f *testing.F) {
	good, _ := json.Marshal(sample())
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"control":"x","user":"u","deviceId":"d","receivedAt":"2026-01-01T00:00:00Z","map":{"device":{"id":"d"},"clusters":[{"cid":"ky3"},{"cid":"ky3"}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Parse(b)
		if err != nil {
			return
		}
		again, _ := json.Marshal(e)
		e2, err := Parse(again)
		if err != nil {
			t.Fatalf("a parsed entry does not parse again: %v\n%s", err, again)
		}
		if e2.DeviceID != e.DeviceID || len(e2.Map.Clusters) != len(e.Map.Clusters) {
			t.Fatalf("the round trip changed the entry: %+v → %+v", e, e2)
		}
	})
}
