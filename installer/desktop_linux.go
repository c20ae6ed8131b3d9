package installer

func nativeLoginItem() loginItem { return xdgItem{} }

func nativeDesktopEnv() (*desktopEnv, error) { return unixDesktopEnv() }
