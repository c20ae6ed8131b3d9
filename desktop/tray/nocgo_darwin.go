//go:build !cgo

package tray

// fyne.io/systray drives AppKit through cgo. This line turns a
// CGO_ENABLED=0 macOS build into an error that says what to do.
var _ = RunOS_Desktop_for_macOS_needs_cgo__build_it_on_a_Mac_with_make_desktop_macos
