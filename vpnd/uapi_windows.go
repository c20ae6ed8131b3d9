package vpnd

// On Windows the UAPI endpoint is a named pipe that dies with its process.
func uapiAlive(name string) bool { return false }

func removeStaleUAPI(name string) {}

// A named pipe leaves nothing behind.
func removeStaleSocket(path string) {}
