package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeRing is a keychain that works (or, with down, fails like one that
// is not running).
type fakeRing struct {
	mu   sync.Mutex
	m    map[string]string
	down bool
}

func (r *fakeRing) Get(service, account string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return "", errors.New("The name org.freedesktop.secrets was not provided by any .service files")
	}
	s, ok := r.m[service+"/"+account]
	if !ok {
		return "", ErrNotFound
	}
	return s, nil
}

func (r *fakeRing) Set(service, account, secret string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return errors.New("The name org.freedesktop.secrets was not provided by any .service files")
	}
	r.m[service+"/"+account] = secret
	return nil
}

func (r *fakeRing) Delete(service, account string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return errors.New("no keychain")
	}
	if _, ok := r.m[service+"/"+account]; !ok {
		return ErrNotFound
	}
	delete(r.m, service+"/"+account)
	return nil
}

func assertFileMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Fatalf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
	}
}

// checkRoundTrip runs Get/Set/Delete on k and returns whether the file
// held the secret while it was set.
func checkRoundTrip(t *testing.T, k *Keystore) (inFile bool) {
	t.Helper()
	if _, err := k.Get("operator"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get before Set: %v, want ErrNotFound", err)
	}
	if err := k.Set("operator", "tok-1"); err != nil {
		t.Fatal(err)
	}
	if err := k.Set("operator", "tok-2"); err != nil {
		t.Fatal(err)
	}
	if s, err := k.Get("operator"); err != nil || s != "tok-2" {
		t.Fatalf("Get = %q, %v; want tok-2", s, err)
	}
	b, err := os.ReadFile(k.path)
	inFile = err == nil && strings.Contains(string(b), "tok-2")
	if err := k.Delete("operator"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Get("operator"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := k.Delete("operator"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	return inFile
}

func TestKeystoreUsesKeychain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runos", "credentials.json")
	k := &Keystore{service: "runos", path: path, ring: &fakeRing{m: map[string]string{}}}
	if checkRoundTrip(t, k) {
		t.Fatal("the secret was written to the file although the keychain took it")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("fallback file exists: %v", err)
	}
}

func TestKeystoreFallsBackWhenKeychainFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runos", "credentials.json")
	ring := &fakeRing{m: map[string]string{}, down: true}
	k := &Keystore{service: "runos", path: path, ring: ring}
	if err := k.Set("operator", "tok"); err != nil {
		t.Fatal(err)
	}
	assertFileMode(t, path, 0o600)
	assertFileMode(t, filepath.Dir(path), 0o700)
	// The keychain comes back: the file's copy is still found, and the next
	// Set moves the secret into the keychain and out of the file.
	ring.down = false
	if s, err := k.Get("operator"); err != nil || s != "tok" {
		t.Fatalf("Get = %q, %v", s, err)
	}
	if err := k.Set("operator", "tok-new"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file still holds a copy: %v", err)
	}
	if s, _ := ring.Get("runos", "operator"); s != "tok-new" {
		t.Fatalf("keychain has %q", s)
	}
}

func TestKeystoreFileRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "credentials.json")
	k := &Keystore{service: "runos", path: path}
	if err := k.Set("a", "1"); err != nil {
		t.Fatal(err)
	}
	if err := k.Set("b", "2"); err != nil {
		t.Fatal(err)
	}
	if err := k.Delete("a"); err != nil {
		t.Fatal(err)
	}
	if s, err := k.Get("b"); err != nil || s != "2" {
		t.Fatalf("other account after delete: %q, %v", s, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Get("b"); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable file: %v", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Get("b"); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("damaged file: %v", err)
	}
	if err := (&Keystore{service: "runos"}).Set("a", "1"); err == nil {
		t.Fatal("no keychain, no file: Set succeeded")
	}
	// No temporary files left behind.
	if m, _ := filepath.Glob(filepath.Join(dir, ".credentials.json.*")); len(m) != 0 {
		t.Fatalf("left behind: %v", m)
	}
}

func TestKeychainReachable(t *testing.T) {
	exists := func(p string) bool { return p == "/run/user/1000/bus" }
	for env, want := range map[[2]string]bool{
		{"unix:path=/run/user/1000/bus", ""}: true,
		{"autolaunch:", ""}:                  false,
		{"", ""}:                             false,
		{"", "/run/user/1000"}:               true,
		{"", "/run/user/0"}:                  false,
	} {
		get := func(k string) string {
			return map[string]string{"DBUS_SESSION_BUS_ADDRESS": env[0], "XDG_RUNTIME_DIR": env[1]}[k]
		}
		if got := keychainReachable(get, exists); got != want {
			t.Errorf("%q: %v, want %v", env, got, want)
		}
	}
}

// With no session bus at all (this machine, a server over SSH), the real
// OpenKeystore keeps the secret in the 0600 file.
func TestOpenKeystoreWithoutBus(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	path := filepath.Join(t.TempDir(), "runos", "credentials.json")
	k := OpenKeystore("runos-test", path)
	if k.ring != nil {
		t.Fatal("a keychain was assumed with no session bus")
	}
	if !checkRoundTrip(t, k) {
		t.Fatal("the secret was not in the file")
	}
	if err := k.Set("operator", "tok"); err != nil {
		t.Fatal(err)
	}
	assertFileMode(t, path, 0o600)
	assertFileMode(t, filepath.Dir(path), 0o700)
}
