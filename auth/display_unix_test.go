//go:build !darwin && !windows

package auth

import "testing"

func TestNoDisplayLinux(t *testing.T) {
	for env, want := range map[string]bool{"": true, "DISPLAY": false, "WAYLAND_DISPLAY": false, "SSH_CONNECTION": true} {
		got := noDisplay(func(k string) string {
			if k == env {
				return "x"
			}
			return ""
		}) != ""
		if got != want {
			t.Errorf("with only %q set: no display %v, want %v", env, got, want)
		}
	}
}
