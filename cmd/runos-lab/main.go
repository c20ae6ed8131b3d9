//go:build !windows

// Command runos-lab builds a whole RunOS world in network namespaces on
// this machine; see `runos-lab --help` and lab/README.md.
package main

import (
	"os"

	"github.com/runos/vpn/lab/labcmd"
)

func main() { os.Exit(labcmd.Main(os.Args[1:], os.Stdout, os.Stderr)) }
