//go:build linux

package labbench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSyscallCounts reads perf stat's per-thread CSV (as perf 6 writes it)
// into counts per program and event.
func TestSyscallCounts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "s.csv")
	csv := "# started on Sat Dec  5 12:58:47 2026\n\n" +
		"runos-gateway-29875,218,,syscalls:sys_enter_futex,41346645,100.00,,\n" +
		"runos-gateway-30248,33,,syscalls:sys_enter_futex,14518788,100.00,,\n" +
		"runos-4242,10,,syscalls:sys_enter_sendmmsg,1,100.00,,\n" +
		"runos-4243,0,,syscalls:sys_enter_write,1,100.00,,\n" +
		"wireguard-go-up-7,5,,sched:sched_switch,1,100.00,,\n" +
		"garbage line\n"
	if err := os.WriteFile(file, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := syscallCounts(file)
	if err != nil {
		t.Fatal(err)
	}
	if got["runos-gateway"]["futex"] != 251 || got["runos"]["sendmmsg"] != 10 || got["wireguard-go-up"]["sched_switch"] != 5 {
		t.Errorf("counts: %v", got)
	}
	if _, ok := got["runos"]["write"]; ok {
		t.Error("a zero count was kept")
	}
	table := syscallTable(got, 2, "runos")
	if !strings.Contains(table, "runos-gateway") || !strings.Contains(table, "futex=126") || strings.Contains(table, "wireguard") {
		t.Errorf("table:\n%s", table)
	}
}
