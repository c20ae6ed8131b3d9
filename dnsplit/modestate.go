package dnsplit

import "sync"

// modeState is what the modes that keep per-domain entries in step with the
// routes (resolver files, NRPT rules) do alike as Configurators: one lock
// over the whole mode, routes checked before anything changes, and a Status
// whose Error is that of the last Set ("" once one works).
type modeState struct {
	mu     sync.Mutex // guards the embedding mode's own fields too
	status Status
}

func newModeState(mode, reason string) modeState {
	return modeState{status: Status{Mode: mode, Reason: reason}}
}

func (s *modeState) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// apply is such a mode's Set: under the lock, routes are normalized and
// handed to set, and the outcome is kept for Status.
func (s *modeState) apply(routes []Route, set func([]Route) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	routes, err := normalizeRoutes(routes)
	if err == nil {
		err = set(routes)
	}
	s.status.Error = ""
	if err != nil {
		s.status.Error = err.Error()
	}
	return err
}
