// Package nodekey keeps the gateway's WireGuard private key on the node: it
// is generated there on first start, stored in the state directory (0700)
// as gateway.key (0600, written atomically) and never leaves the machine.
// Only its public key is ever reported or logged.
package nodekey

import (
	"github.com/runos/vpn/internal/atomicfile"

	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// FileName is the key's file inside the state directory.
const FileName = "gateway.key"

// LoadOrCreate returns the node's private key from dir/gateway.key,
// generating and storing it first when there is none. created says whether
// it was generated now. The directory is created 0700 (or tightened to it),
// and a key file readable by others is tightened to 0600 with a warning.
func LoadOrCreate(dir string, log *slog.Logger) (key wgtypes.Key, created bool, err error) {
	if dir == "" {
		return key, false, errors.New("node key: no state directory given")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return key, false, fmt.Errorf("node key: create state directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return key, false, fmt.Errorf("node key: state directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	key, err = load(path, log)
	if err == nil {
		return key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	key, err = wgtypes.GeneratePrivateKey()
	if err != nil {
		return key, false, fmt.Errorf("node key: generate: %w", err)
	}
	if err := atomicfile.WriteFile(path, []byte(key.String()+"\n"), 0o600); err != nil {
		return wgtypes.Key{}, false, fmt.Errorf("node key: store %s: %w", path, err)
	}
	return key, true, nil
}

func load(path string, log *slog.Logger) (wgtypes.Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return wgtypes.Key{}, err
	}
	if !st.Mode().IsRegular() {
		return wgtypes.Key{}, fmt.Errorf("node key: %s is not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if log != nil {
			log.Warn("node key file was readable by others; tightening it to 0600", "path", path, "mode", st.Mode().Perm().String())
		}
		if err := os.Chmod(path, 0o600); err != nil {
			return wgtypes.Key{}, fmt.Errorf("node key: tighten %s: %w", path, err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return wgtypes.Key{}, fmt.Errorf("node key: %w", err)
	}
	key, err := wgtypes.ParseKey(strings.TrimSpace(string(b)))
	if err != nil {
		// Never echo the file's content: it may be a (damaged) private key.
		return wgtypes.Key{}, fmt.Errorf("node key: %s does not hold a WireGuard key (base64, 32 bytes); move it away to generate a new key", path)
	}
	return key, nil
}
