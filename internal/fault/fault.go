// Package fault names the points of a change at which a test may make the
// process stop dead, the way a crash or a kill -9 would: no deferred
// function runs, no file is closed, nothing is undone. It exists so that
// tests can prove that whatever is left at each point is put right by the
// next start or `runos vpnd --cleanup`.
//
// It is not a way to fail on purpose in production: Point does nothing in a
// normal build. Only a binary built with the build tag runosfault (which
// the fault-injection tests build for themselves) reads RUNOS_FAULT, and
// stops at the point it names:
//
//	RUNOS_FAULT=resolv.conf-apply-written      the first time that point is reached
//	RUNOS_FAULT=resolv.conf-apply-written@2    the second time
//
// A process that stops at a point writes "fault: stopped dead at <point>"
// to stderr and exits with ExitCode.
package fault

// ExitCode is the exit status of a process stopped at a point, so a test
// can tell the planned stop from a real failure.
const ExitCode = 86
