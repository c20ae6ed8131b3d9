package repotest

import (
	"os/exec"
	"path"
	"strings"
	"testing"

	"github.com/runos/vpn/internal/testenv"
)

// TestProgramsAtTheRootAreIgnored: `go build ./some/program` at the top
// leaves a binary named after the program's directory there; .gitignore
// must cover every one (and its .exe), or a `git add -A` commits it (a
// 27 MB runos-control once was).
func TestProgramsAtTheRootAreIgnored(t *testing.T) {
	top, _ := trackedFiles(t)
	testenv.Tools(t, "go")
	list := exec.Command("go", "list", "-f", "{{if eq .Name \"main\"}}{{.ImportPath}}{{end}}", "./...")
	list.Dir = top
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %s", errText(err))
	}
	var names []string
	for _, p := range strings.Fields(string(out)) {
		n := path.Base(p)
		if n == "bench" { // a directory of the repository: go build refuses to write over it
			continue
		}
		names = append(names, n, n+".exe")
	}
	if len(names) == 0 {
		t.Fatal("go list found no programs")
	}
	for _, n := range names {
		check := exec.Command("git", "check-ignore", "-q", "--no-index", n)
		check.Dir = top
		if err := check.Run(); err != nil {
			t.Errorf("%s at the repository's top is not ignored: add /%s to .gitignore", n, n)
		}
	}
}
