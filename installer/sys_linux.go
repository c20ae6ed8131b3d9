package installer

import "path/filepath"

// DefaultName is the service's name.
const DefaultName = "runos-vpnd"

// DefaultBinary is where Install puts runos.
func DefaultBinary() string { return "/usr/local/bin/runos" }

// packagedBinary is where the .deb and .rpm put runos: run from there,
// install registers it in place instead of copying it to DefaultBinary,
// so that the package manager keeps owning (and upgrading) the program.
const packagedBinary = "/usr/bin/runos"

func defaultLogFile(name string) string { return "/var/log/" + name + ".log" }

// daemonWritesLog is false: the System V script and launchd send the
// daemon's output to the log file.
const daemonWritesLog = false

func defaultPIDFile(name string) string { return "/var/run/" + name + ".pid" }

// readWritePaths are the directories the daemon writes besides its own
// under systemd's ProtectSystem=strict: resolv.conf's, where the resolv.conf
// mode of split DNS replaces the file (atomically, so the directory), and
// the directory of the file it links to, if it is a link ("-": the unit
// still starts when that directory is gone).
func readWritePaths() []string {
	dirs := []string{"/etc"}
	if real, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil {
		if d := filepath.Dir(real); d != "/etc" {
			dirs = append(dirs, "-"+d)
		}
	}
	return dirs
}
