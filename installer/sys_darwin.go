package installer

// DefaultName is the service's name (launchd's label).
const DefaultName = "com.runos.vpnd"

// DefaultBinary is where Install puts runos.
func DefaultBinary() string { return "/usr/local/bin/runos" }

// packagedBinary: no package manager installs runos on macOS.
const packagedBinary = ""

func defaultLogFile(name string) string { return "/var/log/" + name + ".log" }

// daemonWritesLog is false: the System V script and launchd send the
// daemon's output to the log file.
const daemonWritesLog = false

func defaultPIDFile(string) string { return "" } // launchd tracks the process itself

func readWritePaths() []string { return nil }
