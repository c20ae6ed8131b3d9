// Package hosted is the end-to-end test for macOS and Windows, run by the
// hosted runners of .github/workflows/ (it cannot run on the Linux
// machines the rest of e2e/ runs on): on the runner itself, as its
// administrator, it starts control and a gateway on loopback, installs
// the VPN service with runos vpn install, signs in with the device code
// (approved through the real login page), connects, checks split DNS with
// the system's own tool (scutil --dns, Get-DnsClientNrptRule), disconnects
// and checks the system is as before. RUNOS_HOSTED_E2E=1 and
// RUNOS_HOSTED_BIN (the directory of make build's programs) turn it on.
package hosted
