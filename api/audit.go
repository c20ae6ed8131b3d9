package api

// The audit log's words, shared by control (which writes entries) and its
// clients (which filter and show them), so a client never links the server.

// Kinds of entry. A filter by kind matches the kind itself or, given the
// part before the dot ("device"), every kind under it.
const (
	AuditSignedIn  = "session.signed_in"  // a sign-in (any app; the console too)
	AuditSignedOut = "session.signed_out" // the user ended their own session
	// AuditSessionEnded: an operator ended a user's session.
	AuditSessionEnded = "session.ended"

	AuditDeviceRegistered = "device.registered"
	AuditDeviceJoined     = "device.joined"
	AuditDeviceLeft       = "device.left"
	AuditDeviceRevoked    = "device.revoked"
	AuditDeviceDeleted    = "device.deleted" // by an operator, by its user (removed), or idle

	AuditServiceAdded   = "service.added"
	AuditMoveRequested  = "move.requested"
	AuditMoveDone       = "move.done"
	AuditMoveFailed     = "move.failed"
	AuditIngressChanged = "node.ingress_changed"
	AuditNodeDeleted    = "node.deleted"

	AuditTokenCreated = "token.created"
	AuditTokenRevoked = "token.revoked"

	// Access policy (issue 23): a document set, a group's members
	// changed, a join refused by the policy.
	AuditPolicySet    = "policy.set"
	AuditGroupChanged = "group.changed"
	AuditJoinRefused  = "join.refused"
	// AuditUserRemoved: an operator removed a user from the account.
	AuditUserRemoved = "user.removed"
)

// AuditKinds lists every kind, for help texts and validation.
var AuditKinds = []string{AuditSignedIn, AuditSignedOut, AuditSessionEnded, AuditDeviceRegistered, AuditDeviceJoined, AuditDeviceLeft, AuditDeviceRevoked,
	AuditDeviceDeleted, AuditServiceAdded, AuditMoveRequested, AuditMoveDone, AuditMoveFailed, AuditIngressChanged, AuditNodeDeleted, AuditTokenCreated, AuditTokenRevoked,
	AuditPolicySet, AuditGroupChanged, AuditJoinRefused, AuditUserRemoved}

// Kinds of actor.
const (
	ActorUser    = "user"    // a signed-in person: Actor is the email
	ActorToken   = "token"   // an operator API token: Actor is its name
	ActorControl = "control" // control itself (an idle device's clean-up, a move's outcome)
)
