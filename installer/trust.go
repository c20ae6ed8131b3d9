package installer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/runos/vpn/vpnd/store"
)

// TrustFileName records, in the state directory, the --allowed-routes and
// --allowed-dns-domains given to `runos vpn install`, so that an upgrade
// (install run again without them) keeps passing them to the daemon, as
// the copied CA is kept.
const TrustFileName = "install-trust.json"

// Trust is what the daemon may accept from control beyond its defaults:
// the daemon's own --allowed-routes and --allowed-dns-domains. Empty
// fields leave the daemon's defaults.
type Trust struct {
	AllowedRoutes     []string `json:"allowedRoutes,omitempty"`
	AllowedDNSDomains []string `json:"allowedDNSDomains,omitempty"`
}

func (t Trust) empty() bool { return len(t.AllowedRoutes) == 0 && len(t.AllowedDNSDomains) == 0 }

// readTrust reads what an earlier install recorded; none is the zero Trust.
func readTrust(stateDir string) (Trust, error) {
	var t Trust
	b, err := os.ReadFile(filepath.Join(stateDir, TrustFileName))
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("%s: %w", TrustFileName, err)
	}
	return t, nil
}

// recordTrust writes t into the state directory and returns its undo.
func recordTrust(stateDir string, t Trust) (undo func() error, err error) {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, err
	}
	return replaceFile(filepath.Join(stateDir, TrustFileName), func(dst string) error { return store.WriteFile(dst, append(b, '\n')) })
}
