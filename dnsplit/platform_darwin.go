package dnsplit

import (
	"fmt"
	"log/slog"
)

func newPlatform(opt Options) (Configurator, string, string, error) {
	j, err := openJournal(opt.StateDir)
	if err != nil {
		return nil, "", "", err
	}
	switch opt.Mode {
	case ModeOff:
		r := "split DNS turned off by configuration"
		return newOff(r), ModeOff, r, nil
	case "", ModeResolverFiles:
	default:
		return nil, "", "", fmt.Errorf("dns: mode %q does not exist on macOS (choose %s or %s)", opt.Mode, ModeResolverFiles, ModeOff)
	}
	r := fmt.Sprintf("macOS routes per-domain DNS through %s/<domain> files (mDNSResponder watches the directory)", opt.ResolverDir)
	return newResolverFilesMode(opt, j, r), ModeResolverFiles, r, nil
}

func platformUndoers(log *slog.Logger) map[string]undoer {
	return map[string]undoer{kindResolverFile: removeResolverFile}
}
