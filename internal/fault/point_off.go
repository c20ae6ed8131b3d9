//go:build !runosfault

package fault

// Point marks a named point of a change; in this build it does nothing.
func Point(name string) {}

// Enabled reports whether this build stops at points (built with runosfault).
const Enabled = false
