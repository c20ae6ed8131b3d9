// Package audit is control's audit log: what changed, who caused it (a
// user, an operator API token, or control itself), from where, to what,
// and how it ended. An entry is written by the change it describes, in the
// same store transaction (Record takes the transaction's writer), so the
// log never says something happened that was rolled back, nor misses what
// was committed.
//
// It is not a debug log: only changes of state a person or a token caused
// (and the outcome control reached for them, such as a move's end or an
// idle device's clean-up) are recorded; reads, heartbeats and long-polls
// are not. Entries are kept per account and listed newest first.
package audit

import (
	"context"
	"github.com/runos/vpn/api"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/runos/vpn/control/hub"
)

// Kinds of entry and of actor: the wire contract's (package api).
const (
	SignedIn         = api.AuditSignedIn
	SignedOut        = api.AuditSignedOut
	SessionEnded     = api.AuditSessionEnded
	DeviceRegistered = api.AuditDeviceRegistered
	DeviceJoined     = api.AuditDeviceJoined
	DeviceLeft       = api.AuditDeviceLeft
	DeviceRevoked    = api.AuditDeviceRevoked
	DeviceDeleted    = api.AuditDeviceDeleted
	ServiceAdded     = api.AuditServiceAdded
	MoveRequested    = api.AuditMoveRequested
	MoveDone         = api.AuditMoveDone
	MoveFailed       = api.AuditMoveFailed
	IngressChanged   = api.AuditIngressChanged
	NodeDeleted      = api.AuditNodeDeleted
	TokenCreated     = api.AuditTokenCreated
	TokenRevoked     = api.AuditTokenRevoked
	PolicySet        = api.AuditPolicySet
	GroupChanged     = api.AuditGroupChanged
	JoinRefused      = api.AuditJoinRefused
	UserRemoved      = api.AuditUserRemoved
	ActorUser        = api.ActorUser
	ActorToken       = api.ActorToken
	ActorControl     = api.ActorControl
)

// Kinds lists every kind, for help texts and validation.
var Kinds = api.AuditKinds

// Actor is who caused a change.
type Actor struct {
	Kind string
	Name string
}

// User is a signed-in person.
func User(email string) Actor { return Actor{Kind: ActorUser, Name: email} }

// Token is an operator API token, by name.
func Token(name string) Actor { return Actor{Kind: ActorToken, Name: name} }

// Control is control acting on its own.
var Control = Actor{Kind: ActorControl, Name: "control"}

// String is how the actor is shown: the email, "token NAME", or "control".
func (a Actor) String() string {
	if a.Kind == ActorToken {
		return "token " + a.Name
	}
	return a.Name
}

// Entry is one line of the audit log.
type Entry struct {
	ID      int64 // assigned by the store, increasing
	At      time.Time
	AIDs    []string // the accounts that see it (a user may belong to several)
	Actor   Actor
	Source  string // the caller's address; "" for control itself
	Kind    string
	CID     string // the cluster concerned, if one
	Target  string // what was changed: a device id, a token name, a move id…
	Outcome string // a short result in words
}

// Recorder is the part of a store transaction Record needs (store.Writer
// has it).
type Recorder interface {
	PutAuditEntry(Entry) (int64, error)
	Touch(topics ...string)
}

// Record writes e in the transaction of the change it describes and
// touches its accounts' topics, so that whoever follows the log (the
// console) hears of it with the change.
func Record(w Recorder, e Entry) error {
	e.AIDs = slices.Compact(slices.Sorted(slices.Values(e.AIDs)))
	if _, err := w.PutAuditEntry(e); err != nil {
		return err
	}
	for _, aid := range e.AIDs {
		w.Touch(hub.Account(aid))
	}
	return nil
}

type sourceKey struct{}

// WithSource returns ctx carrying the caller's address (from an
// http.Request's RemoteAddr), for changes made deep inside a handler that
// has no request (a sign-in's session).
func WithSource(ctx context.Context, remoteAddr string) context.Context {
	return context.WithValue(ctx, sourceKey{}, SourceOf(remoteAddr))
}

// Source is the caller's address carried by ctx, "" when none.
func Source(ctx context.Context) string {
	s, _ := ctx.Value(sourceKey{}).(string)
	return s
}

// SourceOf is the address part of an http.Request's RemoteAddr.
func SourceOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().String()
	}
	return host
}
