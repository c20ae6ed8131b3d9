package tray

import (
	"fmt"

	"github.com/godbus/dbus/v5"
)

// Check says why the tray cannot work here, before Run would fail quietly:
// on Linux the menu lives on the user's session D-Bus.
func Check() error {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		return fmt.Errorf("RunOS Desktop needs a desktop session: no session D-Bus (%v); start it from your desktop's session, or use the CLI: runos vpn status", err)
	}
	return conn.Close()
}

// HasHost reports whether a tray (a StatusNotifierWatcher) is on the bus;
// without one the menu is still served but nothing shows it.
func HasHost() bool {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		return false
	}
	defer conn.Close()
	var owner string
	return conn.BusObject().Call("org.freedesktop.DBus.GetNameOwner", 0, "org.kde.StatusNotifierWatcher").Store(&owner) == nil
}
