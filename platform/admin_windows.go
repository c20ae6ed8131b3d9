package platform

// AdminCommand is runos cmd ("vpn install") as a user types it with the
// rights it needs on this OS: Windows has no sudo, only an elevated terminal.
func AdminCommand(cmd string) string {
	return "runos " + cmd + ` (in a terminal opened with "Run as administrator")`
}

// AdminPrefix goes before runos in examples that need those rights: none,
// on Windows the whole terminal is elevated instead.
const AdminPrefix = ""

// AdminHow says how a command gets those rights, for help texts.
const AdminHow = "as administrator"
