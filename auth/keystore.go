package auth

import (
	"github.com/runos/vpn/internal/atomicfile"

	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/zalando/go-keyring"
)

// ErrNotFound is returned by Keystore.Get when no secret is stored.
var ErrNotFound = errors.New("no secret stored")

// ring is the user's keychain: go-keyring's Get, Set and Delete.
type ring interface {
	Get(service, account string) (string, error)
	Set(service, account, secret string) error
	Delete(service, account string) error
}

// osRing is the real keychain: macOS Keychain, Windows Credential Manager,
// the Secret Service (GNOME Keyring, KWallet) over D-Bus elsewhere.
type osRing struct{}

// keychainTimeout bounds one keychain call. go-keyring takes no context,
// and a wedged session bus never answers; this is long enough for a person
// to type the password of a locked keyring at its prompt.
const keychainTimeout = 45 * time.Second

// bounded runs f, giving up (and leaving it to finish on its own) after
// keychainTimeout, so that a sign-in never hangs on the keychain.
func bounded(f func() (string, error)) (string, error) {
	type result struct {
		v   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	t := time.NewTimer(keychainTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
		return "", fmt.Errorf("the keychain did not answer within %v", keychainTimeout)
	}
}

func (osRing) Get(service, account string) (string, error) {
	s, err := bounded(func() (string, error) { return keyring.Get(service, account) })
	if errors.Is(err, keyring.ErrNotFound) {
		return "", ErrNotFound
	}
	return s, err
}

func (osRing) Set(service, account, secret string) error {
	_, err := bounded(func() (string, error) { return "", keyring.Set(service, account, secret) })
	return err
}

func (osRing) Delete(service, account string) error {
	_, err := bounded(func() (string, error) { return "", keyring.Delete(service, account) })
	if errors.Is(err, keyring.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Keystore keeps secrets in the user's keychain, or in a 0600 file where
// no keychain runs (a server over SSH, a container, CI). It is safe for
// concurrent use within one process.
type Keystore struct {
	service string
	path    string // the fallback file
	ring    ring   // nil: no keychain reachable here
	mu      sync.Mutex
}

// OpenKeystore keeps secrets in the user's keychain (go-keyring) under
// service, falling back to a 0600 file at fallbackPath (dir 0700) where no
// keychain runs.
func OpenKeystore(service, fallbackPath string) *Keystore {
	var r ring
	if keychainReachable(os.Getenv, func(p string) bool { _, err := os.Stat(p); return err == nil }) {
		r = osRing{}
	}
	return &Keystore{service: service, path: fallbackPath, ring: r}
}

// Get returns the secret stored for account, or ErrNotFound.
func (k *Keystore) Get(account string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ring != nil {
		s, err := k.ring.Get(k.service, account)
		if err == nil {
			return s, nil
		}
		// Not found there, or no keychain after all: the file may hold it
		// (saved while the keychain was away).
	}
	f, err := k.readFile()
	if err != nil {
		return "", err
	}
	s, ok := f.Secrets[account]
	if !ok {
		return "", ErrNotFound
	}
	return s, nil
}

// Set stores secret for account: in the keychain when it takes it, else in
// the fallback file.
func (k *Keystore) Set(account, secret string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ring != nil && k.ring.Set(k.service, account, secret) == nil {
		// Keep no second, weaker copy.
		return k.removeFromFile(account)
	}
	f, err := k.readFile()
	if err != nil {
		return err
	}
	f.Secrets[account] = secret
	return k.writeFile(f)
}

// Delete removes account's secret from the keychain and the file;
// deleting a missing one is not an error.
func (k *Keystore) Delete(account string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ring != nil {
		_ = k.ring.Delete(k.service, account) // absent, or no keychain: nothing to delete
	}
	return k.removeFromFile(account)
}

// secretsFile is the fallback file's content.
type secretsFile struct {
	Service string            `json:"service"`
	Secrets map[string]string `json:"secrets"`
}

func (k *Keystore) readFile() (*secretsFile, error) {
	f := &secretsFile{Service: k.service, Secrets: map[string]string{}}
	if k.path == "" {
		return f, nil
	}
	fi, err := os.Stat(k.path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("keystore: %s is readable by others (mode %v); run chmod 600 %s", k.path, fi.Mode().Perm(), k.path)
	}
	b, err := os.ReadFile(k.path)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("keystore: %s is damaged (%v); remove it and sign in again", k.path, err)
	}
	if f.Secrets == nil {
		f.Secrets = map[string]string{}
	}
	return f, nil
}

func (k *Keystore) removeFromFile(account string) error {
	if k.path == "" {
		return nil
	}
	f, err := k.readFile()
	if err != nil {
		return err
	}
	if _, ok := f.Secrets[account]; !ok {
		return nil
	}
	delete(f.Secrets, account)
	if len(f.Secrets) == 0 {
		if err := os.Remove(k.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("keystore: %w", err)
		}
		return nil
	}
	return k.writeFile(f)
}

// writeFile replaces the file atomically: a temporary file (0600 from the
// start) in the same directory (0700), synced, then renamed over it.
func (k *Keystore) writeFile(f *secretsFile) error {
	if k.path == "" {
		return errors.New("keystore: no keychain is available and no fallback file is configured")
	}
	dir := filepath.Dir(k.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("keystore: %w", err)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(k.path, b, 0o600); err != nil {
		return fmt.Errorf("keystore: write %s: %w", k.path, err)
	}
	return nil
}
