package installer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Spec is the service as every service manager is told about it: what it
// runs, where its state, socket and logs are. One Spec renders the systemd
// unit, the System V script, the launchd plist and the Windows service
// settings, so the four cannot drift apart.
type Spec struct {
	Name        string // service name: runos-vpnd, com.runos.vpnd on macOS
	DisplayName string
	Description string
	Binary      string // the installed runos
	StateDir    string
	Socket      string
	Interface   string // "" = the daemon's default (wg1)
	CAFile      string // "" = the system roots
	LogFile     string // System V and launchd: the daemon's output
	PIDFile     string // System V: the supervisor's pid (the daemon's is PIDFile + ".daemon")
	// ReadWritePaths are the directories outside the state directory the
	// daemon writes under systemd's ProtectSystem=strict (resolv.conf's).
	ReadWritePaths []string
	// Trust is passed to the daemon as --allowed-routes and
	// --allowed-dns-domains when not empty.
	Trust Trust
}

const (
	displayName = "RunOS VPN"
	description = "RunOS VPN daemon (runos vpnd): the tunnel to your clusters, the device key and split DNS"
)

// DaemonArgs are the arguments of the service's command: runos vpnd with
// every path spelled out, because service managers start it with an empty
// environment.
func (s Spec) DaemonArgs() []string {
	a := append([]string{"vpnd"}, s.commonArgs(true)...)
	if len(s.Trust.AllowedRoutes) > 0 {
		a = append(a, "--allowed-routes", strings.Join(s.Trust.AllowedRoutes, ","))
	}
	if len(s.Trust.AllowedDNSDomains) > 0 {
		a = append(a, "--allowed-dns-domains", strings.Join(s.Trust.AllowedDNSDomains, ","))
	}
	if daemonWritesLog && s.LogFile != "" {
		a = append(a, "--log-file", s.LogFile)
	}
	return a
}

// CleanupArgs undo what the daemon changed (DNS, routes, the tunnel), run
// after it stops.
func (s Spec) CleanupArgs() []string {
	return append([]string{"vpnd", "--cleanup"}, s.commonArgs(false)...)
}

func (s Spec) commonArgs(withCA bool) []string {
	a := []string{"--state-dir", s.StateDir, "--socket", s.Socket}
	if s.Interface != "" {
		a = append(a, "--interface", s.Interface)
	}
	if withCA && s.CAFile != "" {
		a = append(a, "--ca-file", s.CAFile)
	}
	return a
}

// checkPaths refuses characters that no service file format here could
// carry safely (each renderer quotes the rest).
func (s Spec) checkPaths() error {
	for what, p := range map[string]string{"binary": s.Binary, "state directory": s.StateDir, "socket": s.Socket,
		"CA file": s.CAFile, "log file": s.LogFile, "pid file": s.PIDFile, "interface": s.Interface, "service name": s.Name,
		"allowed routes": strings.Join(s.Trust.AllowedRoutes, ","), "allowed DNS domains": strings.Join(s.Trust.AllowedDNSDomains, ",")} {
		if !utf8.ValidString(p) || strings.ContainsFunc(p, unicode.IsControl) || strings.Contains(p, "{{") {
			return fmt.Errorf("%s %q: control characters, invalid UTF-8 or {{ cannot go into a service definition", what, p)
		}
	}
	if s.Name == "" || strings.Trim(s.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != "" {
		return fmt.Errorf("service name %q: want letters, digits, dots, dashes and underscores", s.Name)
	}
	return nil
}

// shellQuote quotes s for a POSIX shell: inside single quotes everything is
// literal except the single quote itself.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellLine(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
