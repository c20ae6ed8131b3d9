package localapi

import (
	"maps"
	"testing"
)

func TestMemStats(t *testing.T) {
	profile := "heap profile: 3: 1024 [40: 4096] @ heap/1048576\n" +
		"1: 1024 [1: 1024] @ 0x1 0x2\n" +
		"\n# runtime.MemStats\n# Alloc = 41234\n# NextGC = 43200512\n# NumGC = 97\n" +
		"# PauseNs = [1 2 3]\n# GCCPUFraction = 0.0012\n# DebugGC = false\n#Bad = 1\n"
	got := memStats(profile)
	want := map[string]uint64{"Alloc": 41234, "NextGC": 43200512, "NumGC": 97}
	if !maps.Equal(got, want) {
		t.Fatalf("memStats = %v, want %v", got, want)
	}
}
