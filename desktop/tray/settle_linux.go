package tray

import (
	"time"

	"fyne.io/systray"
)

// settle works around a start-up race in fyne.io/systray on Linux: it
// exports the item's D-Bus properties a moment after onReady starts, and an
// icon, tooltip or title set in that moment is kept in memory but never
// reaches the bus (the tray shows the first icon forever). Sending them
// again once the export must be done fixes it; a tray that did see them
// just redraws the same icon.
func settle(t *Tray) {
	for _, d := range []time.Duration{500 * time.Millisecond, 2 * time.Second} {
		time.Sleep(d)
		t.refresh()
		systray.SetTitle("RunOS VPN")
	}
}
