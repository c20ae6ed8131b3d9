package platform

// TunnelDeviceName is the name to ask the OS for when creating the tunnel
// interface the daemon calls want (wg1). macOS names every TUN device
// utunN: asking for "utun" lets the kernel pick the first free N, and the
// device's real name is read back after it is made.
func TunnelDeviceName(want string) string { return "utun" }
