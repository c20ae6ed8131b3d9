package auth

import "errors"

// ErrNotFound is returned by Keystore.Get when no secret is stored.
var ErrNotFound = errors.New("auth: secret not found")

// Keystore keeps secrets in the user's keychain, or in a 0600 file where
// no keychain runs.
type Keystore struct {
	service, fallbackPath string
}

// OpenKeystore keeps secrets in the user's keychain (go-keyring) under
// service, falling back to a 0600 file at fallbackPath (dir 0700) where no
// keychain runs.
func OpenKeystore(service, fallbackPath string) *Keystore {
	return &Keystore{service: service, fallbackPath: fallbackPath}
}

// Get returns the secret stored for account, or ErrNotFound.
func (k *Keystore) Get(account string) (string, error) {
	return "", errors.New("auth: Keystore is not implemented yet")
}

// Set stores secret for account.
func (k *Keystore) Set(account, secret string) error {
	return errors.New("auth: Keystore is not implemented yet")
}

// Delete removes account's secret; deleting a missing one is not an error.
func (k *Keystore) Delete(account string) error {
	return errors.New("auth: Keystore is not implemented yet")
}
