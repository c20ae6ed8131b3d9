package menu

import (
	"errors"
	"testing"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// eventsFrom turns fuzz bytes into a sequence of events, the daemon's
// statuses included, so any order of daemon changes, link failures, clicks
// and answers is tried.
func eventsFrom(b []byte) []Event {
	sessions := []string{localapi.SessionSignedIn, localapi.SessionSignedOut, localapi.SessionExpired, localapi.SessionRevoked, ""}
	states := []string{localapi.ClusterConnecting, localapi.ClusterConnected, localapi.ClusterDisconnected, localapi.ClusterError, "?"}
	cids := []string{"ky3", "xym", "abc"}
	kinds := []OpKind{OpNone, OpUp, OpDown, OpConnect, OpDisconnect, OpCancelSignIn, OpRetry, OpOpenConsole, OpQuit, OpKind(99)}
	errs := []error{nil, localapi.ErrNoDaemon, errors.New("boom"), &api.Error{Code: localapi.CodeForbidden, Hint: "x"}}
	var evs []Event
	for i := 0; i+2 < len(b); i += 3 {
		x, y, z := b[i], b[i+1], b[i+2]
		op := Op{Kind: kinds[int(y)%len(kinds)], CID: cids[int(z)%len(cids)]}
		if z&0x80 != 0 {
			op.CID = ""
		}
		switch x % 6 {
		case 0:
			st := &localapi.Status{Seq: uint64(y), Session: localapi.Session{State: sessions[int(z)%len(sessions)]}}
			for j, cid := range cids {
				if y>>j&1 == 1 {
					st.Clusters = append(st.Clusters, localapi.ClusterStatus{CID: cid, State: states[int(z>>j)%len(states)],
						Wanted: z>>(j+3)&1 == 1, PeerUp: y>>(j+4)&1 == 1})
				}
			}
			switch x / 6 % 3 { // a daemon that says nothing, one that grants control, one that does not
			case 1:
				st.Access = &localapi.Access{Control: true, Reason: "root and may change the VPN state"}
			case 2:
				st.Access = &localapi.Access{Reason: "uid 1001 may only read the VPN status", Hint: "ask an administrator to run: sudo runos vpn install --operator bob"}
			}
			if x&0x80 != 0 {
				st.Warnings = []localapi.Warning{{Code: localapi.WarnSessionExpiring, Message: "the session ends soon"},
					{Code: localapi.WarnSessionExpired, Message: "the session expired"},
					{Code: localapi.WarnDNS, Message: "dns: boom"}, {Code: "from-the-future", Message: "something new"}, {}}
			}
			evs = append(evs, StatusEvent{st})
		case 1:
			evs = append(evs, LostEvent{Err: errs[int(y)%len(errs)]})
		case 2:
			evs = append(evs, ClickEvent{Op: op})
		case 3:
			evs = append(evs, SignInEvent{Active: y&1 == 1})
		case 4:
			evs = append(evs, DoneEvent{Op: op, Err: errs[int(z)%len(errs)]})
		case 5:
			evs = append(evs, StatusEvent{nil})
		}
	}
	return evs
}

// FuzzApply checks the rules that hold in every state: the app never asks
// for a browser sign-in on its own (OpUp only answers a click on an
// enabled item), at most one sign-in is in flight, a user the daemon says
// may only read gets no state-changing item and starts no change, and
// Build never panics.
func FuzzApply(f *testing.F) {
	f.Add([]byte{0, 7, 0x3f, 2, 1, 0, 3, 1, 0, 4, 1, 0})
	f.Add([]byte{1, 1, 0, 0, 7, 0x08, 2, 3, 1, 4, 3, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, atLogin := range []bool{false, true} {
			s := State{AtLogin: atLogin}
			for _, ev := range eventsFrom(b) {
				m := Build(s, now)
				clickable := map[Op]bool{}
				for _, it := range append([]Item{m.Toggle, m.Console, m.Quit}, append(m.Notices, m.Clusters...)...) {
					if it.Enabled {
						clickable[it.Click] = true
					}
				}
				var ops []Op
				s, ops = Apply(s, ev)
				if se, ok := ev.(StatusEvent); ok && se.Status != nil && se.Status == s.Status && se.Status.Access != nil && !se.Status.Access.Control {
					for _, op := range ops {
						if changes(op) {
							t.Fatalf("%v started for a user who may only read", op)
						}
					}
					m := Build(s, now)
					for _, it := range append([]Item{m.Toggle}, m.Clusters...) {
						if it.Enabled && changes(it.Click) {
							t.Fatalf("read-only menu offers %+v", it)
						}
					}
				}
				for _, op := range ops {
					if op.Kind != OpUp {
						continue
					}
					c, ok := ev.(ClickEvent)
					if !ok || c.Op != op {
						t.Fatalf("OpUp from %#v", ev)
					}
					if !clickable[op] {
						t.Fatalf("OpUp from a click on a disabled or absent item %v", op)
					}
				}
				ups := 0
				for _, op := range s.Busy {
					if op.Kind == OpUp {
						ups++
					}
				}
				if ups > 1 {
					t.Fatalf("%d sign-ins in flight: %v", ups, s.Busy)
				}
			}
			Build(s, now)
		}
	})
}

// changes reports whether op changes the daemon's state.
func changes(op Op) bool {
	switch op.Kind {
	case OpUp, OpDown, OpConnect, OpDisconnect:
		return true
	}
	return false
}
