//go:build !windows

package labcmd

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/lab"
)

// idpCmd is the lab's identity provider on host idp (lab/idp.go).
func idpCmd() *cobra.Command {
	var config string
	c := &cobra.Command{
		Use:    "idp",
		Short:  "The lab's OpenID Connect provider on host idp",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := os.ReadFile(config)
			if err != nil {
				return err
			}
			var cfg lab.IdPConfig
			if err := json.Unmarshal(b, &cfg); err != nil {
				return fmt.Errorf("%s: %w", config, err)
			}
			return lab.ServeIdP(cmd.Context(), cfg, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
		},
	}
	c.Flags().StringVar(&config, "config", "", "the provider's configuration (issuer, certificate, clients, users), written by runos-lab up")
	_ = c.MarkFlagRequired("config")
	return c
}
