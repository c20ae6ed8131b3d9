//go:build !linux

package tray

import "log/slog"

func show(log *slog.Logger, status string) {
	log.Info("asked to show itself; the menu-bar icon is on screen", "status", status)
}
