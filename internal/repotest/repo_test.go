package repotest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/testenv"
)

// maxFileSize is the largest a tracked file may be: anything bigger is
// build output, a data dump or a capture, none of which belong in git.
const maxFileSize = 1 << 20

// machinePath matches an absolute path that only makes sense on the machine
// where something was built or measured. A letter in brackets keeps this
// file from matching itself. What is not matched on purpose: /tmp/... and
// /home/<name>/.config-like paths in examples and test fixtures, and the
// product's own paths (/usr/bin, /etc, /var/run).
var machinePath = regexp.MustCompile(
	// A checkout or a home directory of this project's machines.
	`(^|[^\w.~-])(/wor[k]/|/roo[t]/` +
		// A developer's source tree under a home directory.
		`|/(hom[e]|User[s])/[^/\s]+/(go|src|work|code|projects|repos|git|dev)/)` +
		// Go's temporary build directories, build and module caches,
		// the toolchain's sources (as a stack trace prints them), and the
		// directories t.TempDir makes.
		`|go-buil[d][0-9]{4,}|/\.cache/go-buil[d]/|/go/pk[g]/mod/|/usr/local/g[o]/src/|/tmp/Tes[t]\w+[0-9]{6,}/`)

// machineHints are the plain strings one of which every machinePath match
// holds: a file without any is not given to the regular expression, which
// is slow under -race over megabytes of results. (The bars keep this file
// from holding them.)
var machineHints = strings.Fields(strings.ReplaceAll(
	"/wo|rk/ /ro|ot/ /ho|me/ /Us|ers/ go-bu|ild /go/p|kg/mod/ /usr/local/g|o/src/ /tmp/Te|st", "|", ""))

// TestTrackedFiles reads every file git tracks and fails for each that is
// an executable binary, over maxFileSize, or holds a path of the machine.
func TestTrackedFiles(t *testing.T) {
	top, files := trackedFiles(t)
	machine := localPaths(top)
	checked := 0
	for _, name := range files {
		p := filepath.Join(top, name)
		fi, err := os.Lstat(p)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if !fi.Mode().IsRegular() {
			continue // a symbolic link's target is checked on its own
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		for _, problem := range problems(data, machine) {
			t.Errorf("%s: %s", name, problem)
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("git lists no files in %s", top)
	}
	t.Logf("%d tracked files checked", checked)
}

// trackedFiles is the checkout's top directory and the files git tracks,
// or a skip (a failure under RUNOS_E2E=1) outside a git checkout.
func trackedFiles(t *testing.T) (string, []string) {
	t.Helper()
	testenv.Tools(t, "git")
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		testenv.Skip(t, "needs a git checkout of the repository (git rev-parse: "+errText(err)+")")
	}
	top := strings.TrimSpace(string(out))
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = top
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("list the tracked files of %s: %s", top, errText(err))
	}
	return top, strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
}

func errText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return err.Error()
}

// localPaths is the paths of the machine running the test that no file
// should name, whatever machine that is: the checkout itself and the
// user's home (left out when it is the root directory or a temporary one).
func localPaths(top string) []string {
	paths := []string{top + "/"}
	if home, err := os.UserHomeDir(); err == nil && len(home) > 1 && !strings.HasPrefix(home, os.TempDir()) {
		paths = append(paths, strings.TrimSuffix(home, "/")+"/")
	}
	return paths
}

// problems is what is wrong with one tracked file's contents.
func problems(data []byte, machine []string) []string {
	var out []string
	if len(data) > maxFileSize {
		out = append(out, fmt.Sprintf("%d bytes, over the %d a tracked file may have", len(data), maxFileSize))
	}
	if kind := executable(data); kind != "" {
		// Its paths would only repeat what this says.
		return append(out, "an executable binary ("+kind+"): build output is not committed")
	}
	if m := findMachinePath(data); m != nil {
		out = append(out, fmt.Sprintf("holds %q, a path of the machine it was made on", lineAround(data, m)))
	}
	for _, p := range machine {
		if bytes.Contains(data, []byte(p)) {
			out = append(out, fmt.Sprintf("holds %q, a path of this machine", p))
		}
	}
	return out
}

// findMachinePath is the first path of a build machine in data, or nil.
func findMachinePath(data []byte) []byte {
	for _, h := range machineHints {
		if bytes.Contains(data, []byte(h)) {
			return machinePath.Find(data)
		}
	}
	return nil
}

// executable names the executable format data starts with, or is "".
func executable(data []byte) string {
	if len(data) < 4 {
		return ""
	}
	switch m := binary.BigEndian.Uint32(data); {
	case bytes.HasPrefix(data, []byte("\x7fELF")):
		return "ELF"
	case m == 0xfeedface || m == 0xfeedfacf || m == 0xcefaedfe || m == 0xcffaedfe:
		return "Mach-O"
	case m == 0xcafebabe || m == 0xbebafeca:
		return "Mach-O universal"
	case bytes.HasPrefix(data, []byte("MZ")) && len(data) >= 0x40:
		// A PE file starts with a DOS header whose last field points at
		// the "PE\0\0" signature.
		off := int(binary.LittleEndian.Uint32(data[0x3c:]))
		if off >= 0 && off+4 <= len(data) && bytes.Equal(data[off:off+4], []byte("PE\x00\x00")) {
			return "PE"
		}
	}
	return ""
}

// lineAround is the match with a little of its line, for the message.
func lineAround(data, m []byte) string {
	i := bytes.Index(data, m)
	start, end := i, i+len(m)
	for start > 0 && i-start < 30 && data[start-1] != '\n' {
		start--
	}
	for end < len(data) && end-i < 60 && data[end] != '\n' {
		end++
	}
	return string(data[start:end])
}
