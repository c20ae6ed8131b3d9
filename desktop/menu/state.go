package menu

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// Link is how the app is connected to the daemon.
type Link int

// Links to the daemon.
const (
	LinkStarting Link = iota // nothing heard yet
	LinkUp                   // following the daemon's stream
	LinkNoDaemon             // the socket cannot be reached: the daemon is not running
	LinkLost                 // the stream broke (e.g. the daemon restarts); reconnecting
)

// State is everything the menu is built from. Apply is the only thing that
// changes it; Build derives the menu from it.
type State struct {
	// Fixed at start.
	AtLogin    bool   // launched by the login item (`runos-desktop --at-login`)
	OSUser     string // the desktop user, named in the read-only hint
	ConsoleURL string // --console-url; "" for control's URL
	APIURL     string // control's URL from the user's config ("" if none)
	ConfigErr  string // the user's config file could not be read

	// The daemon.
	Link      Link
	LinkErr   string           // why the daemon cannot be reached
	Status    *localapi.Status // the latest status while Link is LinkUp; read-only
	ReadOnly  bool             // this user may only read (the status's access, or a refusal)
	ReadHint  string           // what grants access, in the daemon's words
	ReadWhy   string           // why this user may only read, in the daemon's words
	loginDone bool             // the at-login decision has been taken

	// The user.
	SigningIn bool   // a browser sign-in is in progress
	Busy      []Op   // operations in flight
	Err       string // the last operation's failure, until the next click
}

// Event is something that happened: a status from the daemon, the link to
// it breaking, a click, an operation ending.
type Event interface{ event() }

// StatusEvent is a status from the daemon's stream (or an operation's
// answer).
type StatusEvent struct{ Status *localapi.Status }

// LostEvent says the daemon cannot be followed any more: Err wraps
// localapi.ErrNoDaemon when its socket cannot be reached.
type LostEvent struct{ Err error }

// ClickEvent is the user choosing a menu item.
type ClickEvent struct{ Op Op }

// SignInEvent says the browser sign-in started (Active) or ended.
type SignInEvent struct{ Active bool }

// DoneEvent is an operation ending; Status is the daemon's answer, if any.
type DoneEvent struct {
	Op     Op
	Err    error
	Status *localapi.Status
}

func (StatusEvent) event() {}
func (LostEvent) event()   {}
func (ClickEvent) event()  {}
func (SignInEvent) event() {}
func (DoneEvent) event()   {}

// Apply returns the state after ev and the operations the app must start.
// It never asks for a browser sign-in on its own: OpUp only ever comes from
// a click.
func Apply(s State, ev Event) (State, []Op) {
	s.Busy = slices.Clone(s.Busy) // never share backing arrays between states
	switch ev := ev.(type) {
	case StatusEvent:
		return s.onStatus(ev.Status)
	case LostEvent:
		s.Link, s.LinkErr, s.Status = LinkLost, "", nil
		if errors.Is(ev.Err, localapi.ErrNoDaemon) {
			s.Link = LinkNoDaemon
		}
		if ev.Err != nil {
			s.LinkErr = ev.Err.Error()
		}
		// A restarted daemon may have been reinstalled with other operators.
		s.ReadOnly, s.ReadHint, s.ReadWhy = false, "", ""
		return s, nil
	case ClickEvent:
		return s.onClick(ev.Op)
	case SignInEvent:
		s.SigningIn = ev.Active
		return s, nil
	case DoneEvent:
		return s.onDone(ev)
	}
	return s, nil
}

func (s State) onStatus(st *localapi.Status) (State, []Op) {
	if st == nil {
		return s, nil
	}
	if s.Link == LinkUp && s.Status != nil && st.Seq < s.Status.Seq {
		return s, nil // an operation's answer older than the stream's latest
	}
	s.Link, s.LinkErr, s.Status = LinkUp, "", st
	if a := st.Access; a != nil {
		// The daemon says with every status what this user may do, so the
		// menu is read-only before any click. (An older daemon says
		// nothing: then a refusal tells, in onDone.)
		s.ReadOnly, s.ReadHint, s.ReadWhy = !a.Control, a.Hint, a.Reason
		if a.Control {
			s.ReadHint, s.ReadWhy = "", ""
		}
	}
	var ops []Op
	if s.SigningIn && st.Session.State == localapi.SessionSignedIn {
		// Signed in elsewhere (the CLI) while the browser waits: follow it.
		ops = append(ops, Op{Kind: OpCancelSignIn})
	}
	if s.AtLogin && !s.loginDone {
		s.loginDone = true
		ops = append(ops, s.reconnect()...)
	}
	return s, ops
}

// reconnect is the at-login decision: with a valid session, connect again
// every cluster the user wanted that the daemon has not restored itself;
// otherwise nothing (a fresh sign-in waits for the user's click).
func (s *State) reconnect() []Op {
	if s.Status.Session.State != localapi.SessionSignedIn || s.ReadOnly {
		return nil
	}
	var ops []Op
	for _, c := range s.Status.Clusters {
		if c.Wanted && c.State == localapi.ClusterDisconnected {
			op := Op{Kind: OpConnect, CID: c.CID}
			if s.busyOn(op) {
				continue
			}
			s.Busy = append(s.Busy, op)
			ops = append(ops, op)
		}
	}
	return ops
}

// onClick starts what the user chose, if the menu offers it now: a click
// that raced a change (a row that was "Connect" a moment ago, an item that
// has just been disabled) does nothing.
func (s State) onClick(op Op) (State, []Op) {
	if op.Kind == OpNone || !s.offers(op) {
		return s, nil
	}
	switch op.Kind {
	case OpUp, OpDown, OpConnect, OpDisconnect:
		s.Err = ""
		s.Busy = append(s.Busy, op)
	}
	return s, []Op{op}
}

// offers reports whether an enabled item of the current menu does op.
func (s State) offers(op Op) bool {
	m := Build(s, time.Time{})
	for _, it := range append([]Item{m.Toggle, m.Console, m.Quit}, append(m.Notices, m.Clusters...)...) {
		if it.Enabled && it.Click == op {
			return true
		}
	}
	return false
}

// busyOn reports whether op would collide with one in flight: while the
// session ends nothing else starts; the toggle runs one Up or Down at a
// time (so one sign-in at most); a cluster's row runs one operation at a
// time.
func (s *State) busyOn(op Op) bool {
	for _, b := range s.Busy {
		if b.Kind == OpDown || isToggle(b) && isToggle(op) || b.CID != "" && b.CID == op.CID {
			return true
		}
	}
	return false
}

func isToggle(op Op) bool { return op.Kind == OpUp || op.Kind == OpDown }

func (s State) onDone(ev DoneEvent) (State, []Op) {
	if i := slices.Index(s.Busy, ev.Op); i >= 0 {
		s.Busy = slices.Delete(s.Busy, i, i+1)
	}
	var ops []Op
	if ev.Status != nil {
		s, ops = s.onStatus(ev.Status)
	}
	var ae *api.Error
	switch {
	case ev.Err == nil, errors.Is(ev.Err, context.Canceled):
	case errors.As(ev.Err, &ae) && ae.Code == localapi.CodeForbidden:
		s.ReadOnly, s.ReadHint, s.ReadWhy = true, ae.Hint, ae.Message
	case errors.Is(ev.Err, localapi.ErrNoDaemon):
		s.Link, s.LinkErr, s.Status = LinkNoDaemon, ev.Err.Error(), nil
	default:
		s.Err = ev.Err.Error()
	}
	return s, ops
}
