//go:build !linux

// Command bench compares the split-DNS forwarder with dnsmasq under dnsperf;
// it needs Linux network namespaces.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: runs on Linux only (network namespaces, dnsperf, dnsmasq)")
	os.Exit(2)
}
