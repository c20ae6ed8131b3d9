//go:build !windows

// Package e2e holds the end-to-end tests: each test brings up its own lab
// (lab.Up: control, gateways, web apps, the LAN resolver and laptop
// daemons in network namespaces) in its own t.TempDir(), drives it the way
// a user and an operator would (the runos CLI on the laptops, the stock
// wg tool on laptops and nodes), and tears it down in t.Cleanup even when
// it fails. They need root and Debian's tools; under RUNOS_E2E=1 a missing
// requirement fails instead of skipping.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// binDir holds the project's programs, built once for all tests.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		if os.Geteuid() != 0 {
			return m.Run() // every test skips (or fails under RUNOS_E2E=1)
		}
		// RUNOS_E2E_BIN runs the tests against programs built elsewhere
		// (a release, or a build with other settings) instead of building.
		if d := os.Getenv("RUNOS_E2E_BIN"); d != "" {
			binDir = d
			return m.Run()
		}
		d, err := os.MkdirTemp("", "runos-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(d)
		build := exec.Command("go", "build", "-o", d+"/",
			"../cmd/runos", "../cmd/runos-control", "../cmd/runos-gateway", "../cmd/runos-lab")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building the programs:", err)
			return 1
		}
		binDir = d
		return m.Run()
	}())
}
