// Package version is the build's identity, set at link time by the Makefile:
//
//	-ldflags "-X github.com/runos/vpn/internal/version.Version=v0.1.0 ..."
package version

import "fmt"

// Set with -ldflags -X; these are the only package-level variables the
// project has, and nothing writes them at run time.
var (
	Version = "dev"
	Commit  = "unknown"
	Date    = "unknown"
)

// String is one line for `--version` and logs.
func String() string { return fmt.Sprintf("%s (commit %s, built %s)", Version, Commit, Date) }
