package tray

import (
	"log/slog"

	"github.com/godbus/dbus/v5"
)

// show posts a desktop notification saying the app runs, how the VPN
// stands, and where the menu is. (Registering with the tray again from
// here would not help: a tray keys items by the registering connection,
// so it would show a second icon.)
func show(log *slog.Logger, status string) {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		log.Warn("show: no session bus", "err", err)
		return
	}
	defer conn.Close()
	err = conn.Object("org.freedesktop.Notifications", "/org/freedesktop/Notifications").
		Call("org.freedesktop.Notifications.Notify", 0,
			"RunOS Desktop", uint32(0), "", "RunOS Desktop is running",
			status+"\nIts menu is in the system tray.", []string{}, map[string]dbus.Variant{}, int32(6000)).Err
	if err != nil {
		log.Info("show: no notification service", "err", err)
	}
}
