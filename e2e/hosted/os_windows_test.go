package hosted

import (
	"os/exec"
	"testing"
)

// The gateway's Wintun adapter.
const gatewayInterface = "wgvpn"

func program(name string) string { return name + ".exe" }

// adminCommand: the Windows runner's user is an administrator already.
func adminCommand(argv ...string) *exec.Cmd { return exec.Command(argv[0], argv[1:]...) }

func stop(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// dnsConfig is the Name Resolution Policy Table, where split DNS lives on
// Windows.
func dnsConfig(t *testing.T) string {
	t.Helper()
	b, err := exec.Command("powershell", "-NoProfile", "-Command",
		"Get-DnsClientNrptRule | Format-List Namespace,NameServers | Out-String -Width 200").Output()
	if err != nil {
		t.Fatalf("Get-DnsClientNrptRule: %v", err)
	}
	return string(b)
}
