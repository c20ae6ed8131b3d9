package repotest

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// unbar removes the bars that keep this file's examples from being the
// paths they spell (the whole-tree test reads this file too).
func unbar(s string) string { return strings.ReplaceAll(s, "|", "") }

func TestProblemsFindsMachinePaths(t *testing.T) {
	flagged := []string{
		`"command": "go run ./x -out /wo|rk/main/x/results.json"`,
		"BIN=/ro|ot/go/bin/server.test",
		"/ho|me/alice/go|/src/github.com/runos/vpn/control/control.go:12",
		"open /Us|ers/bob/src|/vpn/bench/run.sh",
		"/tmp/go-bu|ild1234567/b001/server.test",
		"GOMODCACHE=/var/cache/go|/pkg/mod/golang.org/x/net",
		"/usr/local/go|/src/runtime/proc.go:283",
		"/tmp/Te|stDaemonMove123456789/001/state.json",
	}
	for _, s := range flagged {
		if got := problems([]byte(unbar(s)), nil); len(got) != 1 {
			t.Errorf("%q: got %q, want one problem", unbar(s), got)
		}
	}
	fine := []string{
		"/usr/bin/wg-quick and /etc/resolv.conf",
		"runos-lab -dir /tmp/lab up",
		"t.Setenv(\"HOME\", \"/home/ana\"); want /home/ana/.config/runos/config.json",
		"https://example.com/work/main",
		"~/work/runos",
		"/var/run/wireguard/wg1.sock",
		"go build -o /tmp/runos-bench ./cmd/runos",
	}
	for _, s := range fine {
		if got := problems([]byte(s), nil); len(got) != 0 {
			t.Errorf("%q: got %q, want none", s, got)
		}
	}
	if got := problems([]byte("see /srv/ci/checkout/x.go"), []string{"/srv/ci/checkout/"}); len(got) != 1 {
		t.Errorf("the checkout's own path: got %q, want one problem", got)
	}
}

func TestProblemsFindsBinariesAndSize(t *testing.T) {
	pe := make([]byte, 0x100)
	copy(pe, "MZ")
	binary.LittleEndian.PutUint32(pe[0x3c:], 0x80)
	copy(pe[0x80:], "PE\x00\x00")
	bins := map[string][]byte{
		"ELF":    append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 64)...),
		"Mach-O": {0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1},
		"PE":     pe,
	}
	for kind, data := range bins {
		got := problems(data, nil)
		if len(got) != 1 || !strings.Contains(got[0], "("+kind+")") {
			t.Errorf("%s: got %q", kind, got)
		}
	}
	if got := problems([]byte("MZ is a text file's first word, not a program\n"), nil); len(got) != 0 {
		t.Errorf("text starting with MZ: got %q", got)
	}
	if got := problems(bytes.Repeat([]byte("a\n"), maxFileSize/2+1), nil); len(got) != 1 {
		t.Errorf("a file over 1 MiB: got %q", got)
	}
}
