//go:build linux || freebsd || openbsd || netbsd

package icons

// StatusNotifierItem trays get fyne.io/systray's pixmap; see draw.SNIPNG.
const trayExt = "-sni.png"
