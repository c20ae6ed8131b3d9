//go:build !windows

package platform

// AdminCommand is runos cmd ("vpn install") as a user types it with the
// rights it needs on this OS.
func AdminCommand(cmd string) string { return "sudo runos " + cmd }

// AdminPrefix goes before runos in examples that need those rights.
const AdminPrefix = "sudo "

// AdminHow says how a command gets those rights, for help texts.
const AdminHow = "with sudo"
