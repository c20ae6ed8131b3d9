package store

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestKeyCreatedOnceAndPrivate(t *testing.T) {
	root := t.TempDir()
	d, err := Open(filepath.Join(root, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(d.Path); fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %v, want 0700", fi.Mode().Perm())
	}
	k1, err := d.Key()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(d.Path, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", fi.Mode().Perm())
	}
	k2, err := d.Key()
	if err != nil {
		t.Fatal(err)
	}
	if k1 != k2 {
		t.Error("second Key() made a new key")
	}
}

func TestMalformedKeyNotEchoed(t *testing.T) {
	d, _ := Open(t.TempDir())
	secret := "not-a-key-but-secret-looking"
	os.WriteFile(filepath.Join(d.Path, KeyFile), []byte(secret), 0o600)
	_, err := d.Key()
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("err = %v; want an error that does not echo the file", err)
	}
}

func TestOpenTightensMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s")
	os.Mkdir(p, 0o755)
	if _, err := Open(p); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestPrefsRoundTrip(t *testing.T) {
	d, _ := Open(t.TempDir())
	if p, err := d.LoadPrefs(); err != nil || !reflect.DeepEqual(p, Prefs{}) {
		t.Fatalf("missing prefs: %+v, %v", p, err)
	}
	want := Prefs{Control: "https://198.51.100.10", APIURL: "https://198.51.100.10", AccessToken: "tok", ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		User: "alice@example.com", DeviceID: "d1", Wanted: []string{"ky3", "xym"}}
	if err := d.SavePrefs(want); err != nil {
		t.Fatal(err)
	}
	got, err := d.LoadPrefs()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// Signed out, the control followed stays.
	if err := d.SavePrefs(Prefs{Control: want.Control}); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LoadPrefs(); got.Control != want.Control || got.AccessToken != "" {
		t.Errorf("signed out: %+v", got)
	}
	// Prefs of a daemon before the field follow the session's control.
	if err := os.WriteFile(filepath.Join(d.Path, PrefsFile), []byte(`{"apiUrl":"https://198.51.100.10","accessToken":"tok"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.LoadPrefs(); got.Control != "https://198.51.100.10" {
		t.Errorf("older prefs: control %q", got.Control)
	}
	fi, _ := os.Stat(filepath.Join(d.Path, PrefsFile))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("prefs mode %v", fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(d.Path)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestCorruptPrefsMovedAside(t *testing.T) {
	d, _ := Open(t.TempDir())
	p := filepath.Join(d.Path, PrefsFile)
	os.WriteFile(p, []byte("{not json"), 0o600)
	pr, err := d.LoadPrefs()
	if err == nil || !strings.Contains(err.Error(), "signed out") {
		t.Fatalf("err = %v", err)
	}
	if !reflect.DeepEqual(pr, Prefs{}) {
		t.Errorf("prefs %+v", pr)
	}
	if _, err := os.Stat(p + ".corrupt"); err != nil {
		t.Error("corrupt file not kept aside")
	}
	if pr, err := d.LoadPrefs(); err != nil || pr.AccessToken != "" {
		t.Errorf("after move: %+v %v", pr, err)
	}
}
