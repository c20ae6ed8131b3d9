package vpnd

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"

	"github.com/runos/vpn/vpnd/store"
)

// tunnelFile records the interface the daemon made, before it makes it, so
// a clean-up after a crash removes that interface even if the next start
// is configured with another name.
const tunnelFile = "tunnel.json"

type tunnelRecord struct {
	Interface string `json:"interface"`
}

func recordTunnel(dir store.Dir, name string) error {
	b, _ := json.Marshal(tunnelRecord{Interface: name})
	return store.WriteFile(filepath.Join(dir.Path, tunnelFile), append(b, '\n'))
}

func forgetTunnel(dir store.Dir) error {
	err := os.Remove(filepath.Join(dir.Path, tunnelFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// tunnelNames is the recorded interface and the configured one.
func tunnelNames(dir store.Dir, configured string) []string {
	names := []string{configured}
	if b, err := os.ReadFile(filepath.Join(dir.Path, tunnelFile)); err == nil {
		var r tunnelRecord
		if json.Unmarshal(b, &r) == nil && r.Interface != "" && !slices.Contains(names, r.Interface) {
			names = append(names, r.Interface)
		}
	}
	return names
}
