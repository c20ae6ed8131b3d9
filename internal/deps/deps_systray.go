//go:build !darwin || cgo

package deps

import _ "fyne.io/systray"
