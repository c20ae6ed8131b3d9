//go:build !darwin

package platform

// TunnelDeviceName is the name to ask the OS for when creating the tunnel
// interface the daemon calls want (wg1). Linux and Windows (Wintun) take the
// name as given.
func TunnelDeviceName(want string) string { return want }
