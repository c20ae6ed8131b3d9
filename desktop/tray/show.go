package tray

import "log/slog"

// Show makes the running app noticeable when a second launch asks for it:
// what that means is the OS's (show_linux.go; elsewhere the menu-bar icon
// is always on screen and there is nothing more to do than log it).
func (t *Tray) Show(log *slog.Logger) {
	t.refresh() // a tray that lost the icon gets it again
	t.mu.Lock()
	status := t.status.cur.Title
	t.mu.Unlock()
	show(log, status)
}
