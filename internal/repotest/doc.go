// Package repotest holds the checks on the repository itself, run as
// tests: no tracked file is an executable binary, none is larger than
// 1 MiB, and none carries an absolute path of the machine that built or
// measured something (a checkout under /work, a home directory, Go's build
// and module caches). Generated output that slips into a commit fails
// `go test` here instead of growing the repository.
//
// It is not for checking the code's behaviour, and it has no code of its
// own besides these tests.
package repotest
