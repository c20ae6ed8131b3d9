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
	case "", ModeNRPT:
	default:
		return nil, "", "", fmt.Errorf("dns: mode %q does not exist on Windows (choose %s or %s)", opt.Mode, ModeNRPT, ModeOff)
	}
	reg := opt.Registry
	if reg == nil {
		reg = winRegistry{}
	}
	r := "Windows routes per-domain DNS through NRPT rules (Dnscache DnsPolicyConfig in the registry)"
	return newNRPTMode(opt, j, reg, r), ModeNRPT, r, nil
}

func platformUndoers(log *slog.Logger) map[string]undoer {
	return map[string]undoer{
		kindNRPTRule: func(c change) error { return winRegistry{}.DeleteKey(c.Key) },
	}
}
