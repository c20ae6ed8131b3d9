package menu

import (
	"fmt"
	"testing"

	"github.com/runos/vpn/vpnd/localapi"
)

func benchState(n int) State {
	var cs []localapi.ClusterStatus
	for i := range n {
		cs = append(cs, cluster(fmt.Sprintf("c%02d", i), localapi.ClusterConnected, i%2 == 0, i%3 != 0))
	}
	s, _ := Apply(State{ConsoleURL: "https://console.example"}, StatusEvent{status(1, localapi.SessionSignedIn, cs...)})
	return s
}

// BenchmarkBuild is deriving the whole menu for ten clusters, what the app
// does on every change the daemon streams.
func BenchmarkBuild(b *testing.B) {
	s := benchState(10)
	for b.Loop() {
		Build(s, now)
	}
}

// BenchmarkApplyStatus is taking one streamed status.
func BenchmarkApplyStatus(b *testing.B) {
	s := benchState(10)
	st := s.Status
	for b.Loop() {
		Apply(s, StatusEvent{st})
	}
}
