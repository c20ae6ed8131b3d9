//go:build !darwin || cgo

package tray

import (
	"fyne.io/systray"

	"github.com/runos/vpn/desktop/menu"
)

// Run starts the tray's event loop on the calling goroutine (the main
// thread, which macOS requires) and returns when Quit is called. onReady
// runs once the tray can take items: create the Tray there, with New.
func Run(onReady, onExit func()) {
	systray.Run(onReady, onExit)
}

// Quit ends Run.
func Quit() { systray.Quit() }

// New creates the tray's items; call it from Run's onReady. click gets the
// Op of every enabled item the user chooses.
func New(click func(menu.Op)) *Tray {
	setTitle("RunOS VPN")
	t := newTray(systrayBackend{}, click)
	go settle(t)
	return t
}

type systrayBackend struct{}

func (systrayBackend) AddItem(checkable bool) item {
	if checkable {
		return sysItem{systray.AddMenuItemCheckbox("", "", false)}
	}
	return sysItem{systray.AddMenuItem("", "")}
}

func (systrayBackend) AddSeparator()                    { systray.AddSeparator() }
func (systrayBackend) Reset()                           { systray.ResetMenu() }
func (systrayBackend) SetIcon(template, regular []byte) { systray.SetTemplateIcon(template, regular) }
func (systrayBackend) SetTooltip(s string)              { systray.SetTooltip(s) }

type sysItem struct{ *systray.MenuItem }

func (i sysItem) Clicked() <-chan struct{} { return i.ClickedCh }
