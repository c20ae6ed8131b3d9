package platform

import (
	"fmt"
	"net/netip"
	"os/exec"
)

// RouteTo is the interface macOS would use for dst (`route -n get`).
func RouteTo(dst netip.Addr) (string, error) {
	out, err := exec.Command("/sbin/route", "-n", "get", dst.String()).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("route -n get %s: %v: %s", dst, err, out)
	}
	if name := parseRouteGet(out); name != "" {
		return name, nil
	}
	return "", fmt.Errorf("route -n get %s: no interface in its answer", dst)
}

// Routes lists the routing table (`netstat -rn`, IPv4 and IPv6).
func Routes() ([]Route, error) {
	out, err := exec.Command("/usr/sbin/netstat", "-rn").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("netstat -rn: %v: %s", err, out)
	}
	return parseNetstat(out), nil
}
