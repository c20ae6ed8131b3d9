// Package vpnd is the privileged daemon on the laptop (`runos vpnd`): it owns
// the wg1 tunnel, the device key, the session handed over by the CLI or the
// desktop app, each cluster's connection and split DNS, and it serves the
// local API of vpnd/localapi.
package vpnd

import (
	"context"
	"errors"
	"log/slog"

	"github.com/runos/vpn/dnsplit"
)

// Config is what `runos vpnd` passes in from its flags.
type Config struct {
	StateDir  string // "" → platform.DefaultStateDir
	Socket    string // "" → platform.SocketPath()
	CAFile    string // trusts control's CA; "" → $RUNOS_CA_FILE, else system roots
	Interface string // "" → "wg1"
	Logger    *slog.Logger
	// DNS makes the split-DNS configurator; nil means DNS mode "off".
	DNS func(iface string, log *slog.Logger) (dnsplit.Configurator, error)
	// Cleanup is dnsplit's crash clean-up; nil: none.
	Cleanup func(stateDir string, log *slog.Logger) error
}

// Run serves until ctx ends, then undoes its changes.
func Run(ctx context.Context, cfg Config) error {
	return errors.New("runos vpnd: not built yet")
}

// Cleanup undoes the changes a previous daemon recorded (`runos vpnd --cleanup`).
func Cleanup(ctx context.Context, cfg Config) error {
	return errors.New("runos vpnd --cleanup: not built yet")
}
