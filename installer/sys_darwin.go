package installer

// DefaultName is the service's name (launchd's label).
const DefaultName = "com.runos.vpnd"

// DefaultBinary is where Install puts runos.
func DefaultBinary() string { return "/usr/local/bin/runos" }

func defaultLogFile(name string) string { return "/var/log/" + name + ".log" }

func defaultPIDFile(string) string { return "" } // launchd tracks the process itself

func readWritePaths() []string { return nil }
