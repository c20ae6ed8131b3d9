package installer

func nativeLoginItem() loginItem { return appBundleItem{} }

func nativeDesktopEnv() (*desktopEnv, error) { return unixDesktopEnv() }
