//go:build darwin || windows

package dnsplit

import "log/slog"

func newPlatform(opt Options) (Configurator, string, string, error) {
	return newOff("not built yet"), ModeOff, "not built yet", nil
}

func platformUndoers(log *slog.Logger) map[string]undoer { return nil }
