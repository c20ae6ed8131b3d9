package icons

// The Windows notification area loads icons from .ico files.
const trayExt = ".ico"
