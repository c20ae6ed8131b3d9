package tray

// setTitle does nothing on macOS: a title there is text beside the icon in
// the menu bar, and the icon alone is what a menu-bar app shows.
func setTitle(string) {}
