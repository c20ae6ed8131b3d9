package hosted

import (
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The gateway's TUN on macOS must be a utun (the next free one).
const gatewayInterface = "utun"

func program(name string) string { return name }

// adminCommand runs argv as root: the runner's user has password-less sudo.
func adminCommand(argv ...string) *exec.Cmd {
	return exec.Command("sudo", append([]string{"-n"}, argv...)...)
}

func stop(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = exec.Command("sudo", "-n", "pkill", "-TERM", "-P", itoa(cmd.Process.Pid)).Run()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// dnsConfig is macOS's resolver configuration as scutil shows it (split
// DNS appears as a resolver with the cluster's domain).
func dnsConfig(t *testing.T) string {
	t.Helper()
	b, err := exec.Command("scutil", "--dns").Output()
	if err != nil {
		t.Fatalf("scutil --dns: %v", err)
	}
	return normalizeScutil(string(b))
}

func itoa(i int) string { return strconv.Itoa(i) }

// normalizeScutil keeps what split DNS changes in scutil --dns (each
// resolver's domain and name servers), sorted: the rest (reach flags,
// interface indexes, resolver numbers) moves between two reads without
// anything being configured.
func normalizeScutil(s string) string {
	keep := regexp.MustCompile(`^\s*(domain|search domain\[\d+\]|nameserver\[\d+\])\s*:`)
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if keep.MatchString(l) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
