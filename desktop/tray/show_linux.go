package tray

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/godbus/dbus/v5"
)

// show registers the item with the StatusNotifierWatcher again (a tray
// that restarted may have dropped it) and posts a desktop notification
// saying where the app is and how the VPN stands.
func show(log *slog.Logger, status string) {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		log.Warn("show: no session bus", "err", err)
		return
	}
	defer conn.Close()
	name := fmt.Sprintf("org.kde.StatusNotifierItem-%d-1", os.Getpid()) // the name fyne.io/systray takes
	err = conn.Object("org.kde.StatusNotifierWatcher", "/StatusNotifierWatcher").
		Call("org.kde.StatusNotifierWatcher.RegisterStatusNotifierItem", 0, name).Err
	if err != nil {
		log.Warn("show: register with the tray again", "err", err)
	}
	err = conn.Object("org.freedesktop.Notifications", "/org/freedesktop/Notifications").
		Call("org.freedesktop.Notifications.Notify", 0,
			"RunOS Desktop", uint32(0), "", "RunOS Desktop is running",
			status+"\nIts menu is in the system tray.", []string{}, map[string]dbus.Variant{}, int32(6000)).Err
	if err != nil {
		log.Info("show: no notification service", "err", err)
	}
}
