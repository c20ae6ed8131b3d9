// Package store is the interface between control's logic and its database.
// The logic (control/server) composes small typed reads and writes inside
// one transaction per change; the store knows SQL and nothing of the rules.
// control/store/sqlstore implements it on SQL, one code for an embedded
// SQLite file (one replica) and PostgreSQL (several replicas, DESIGN.md
// "Scale"); control/store/storetest is the suite both dialects pass.
//
// Versions: every Update that touched a topic (or asked its CommitVersion)
// bumps the global version once and records it as the version of each
// topic touched, in the same transaction (docs/internals.md "Push"). The caller hands the returned
// Change to the hub after the commit; a store shared by replicas also tells
// the other replicas (control/notify).
//
// Changes are serialized: while fn of one Update runs, no other Update of
// any replica commits, so a read inside fn followed by a write (the next
// free address, a move's state) cannot race another replica.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/oauth"
)

// ErrNotFound is returned for a missing record.
var ErrNotFound = errors.New("not found")

// ErrExists is returned when a unique key is already taken.
var ErrExists = errors.New("already exists")

// ErrPoolFull is returned when an address pool has nothing left.
var ErrPoolFull = errors.New("address pool exhausted")

// ErrUnavailable wraps errors of a database that cannot be reached (a
// server that is down or restarting, a broken connection): the API answers
// 503 "store unavailable" and clients retry.
var ErrUnavailable = errors.New("store unavailable")

// Change is what a committed Update touched.
type Change struct {
	Version uint64   // 0 when no topic was touched and CommitVersion was not asked
	Topics  []string // distinct, in the order first touched
}

// Store is control's database.
type Store interface {
	// View runs fn in a read-only transaction: one consistent snapshot.
	View(ctx context.Context, fn func(Reader) error) error
	// Update runs fn in one read-write transaction, committed when fn
	// returns nil and rolled back otherwise (so a refusal changes nothing).
	Update(ctx context.Context, fn func(Writer) error) (Change, error)
	// Grants is the OAuth server's store of pending codes and its
	// slow-down counters.
	Grants() oauth.GrantStore
	// Ping reports whether the database answers (for /readyz).
	Ping(ctx context.Context) error
	// Secret returns the named random secret shared by every replica,
	// made (size bytes) by whichever asks first.
	Secret(ctx context.Context, name string, size int) ([]byte, error)
	// Lease blocks until this process holds the named lease (or ctx
	// ends): at most one replica holds it at a time. It is lost when the
	// holder's connection to the database is, and released by Release or
	// when the process dies, so that another replica takes it at once.
	Lease(ctx context.Context, name string) (Lease, error)
	// TryLease is Lease without waiting: ErrHeld when another holds it.
	TryLease(ctx context.Context, name string) (Lease, error)
	Close() error
}

// ErrHeld is returned by TryLease for a lease another replica holds.
var ErrHeld = errors.New("lease held by another replica")

// Lease is a held lease (Store.Lease).
type Lease interface {
	// Lost is closed when the lease is no longer held.
	Lost() <-chan struct{}
	// Release gives the lease up. It is safe to call more than once.
	Release()
}

// Reader reads inside a transaction.
type Reader interface {
	// Versions: the global one, and the newest of the given topics.
	GlobalVersion() (uint64, error)
	TopicVersion(topics ...string) (uint64, error)
	AllTopicVersions() (map[string]uint64, error)
	// TopicsSince is the version of every topic changed after v: what a
	// replica that may have missed notifications reads to catch up.
	TopicsSince(v uint64) (map[string]uint64, error)

	Account(aid string) (model.Account, error)
	User(email string) (model.User, error) // email matched without regard to case

	Cluster(cid string) (model.Cluster, error)
	Clusters(aids []string) ([]model.Cluster, error) // by cid

	Node(cid, nid string) (model.Node, error)
	Nodes(cid string) ([]model.Node, error) // by nid
	NodeByEnrollmentToken(hash string) (model.Node, error)

	Service(id string) (model.Service, error)
	Services(cid string) ([]model.Service, error)
	// InstallingServices are the services not yet up since they were added.
	InstallingServices() ([]model.Service, error)
	// FreeServiceSubnetIndex is the lowest subnet index in [lo, hi] no service uses.
	FreeServiceSubnetIndex(lo, hi int) (int, error) // ErrPoolFull when none

	Move(id string) (model.Move, error)
	InFlightMove(serviceID string) (model.Move, error)
	InFlightMoves() ([]model.Move, error)
	MoveSwitched(moveID, publicKey string) (bool, error)

	Device(id string) (model.Device, error)
	DeviceByKey(publicKey string) (model.Device, error)
	DeviceClusters(deviceID string) ([]string, error) // joined cids
	// FreeDeviceAddrIndex is the lowest address index in [lo, hi] no device uses.
	FreeDeviceAddrIndex(lo, hi int) (int, error) // ErrPoolFull when none
	CountDevices() (int, error)

	Session(id string) (model.Session, error)
	SessionByToken(hash string) (model.Session, error)
	// LiveSessionsExpiringBy lists live sessions whose expiry is at or before t.
	LiveSessionsExpiringBy(t time.Time) ([]model.Session, error)
	// NextExpiry is the earliest expiry of a live session (ok=false: none).
	NextExpiry() (t time.Time, ok bool, err error)
	// FirstEnded is the earliest end of an ended or expired session (ok=false: none).
	FirstEnded() (t time.Time, ok bool, err error)

	// Peers are the devices joined to cid, not revoked, whose bound
	// session is live at now.
	Peers(cid string, now time.Time) ([]model.Peer, error)
	// PeerCount is len(Peers(cid, now)), without reading them.
	PeerCount(cid string, now time.Time) (int, error)
	DevicesOfSession(sessionID string) ([]model.Device, error)

	// ClusterInside is what the cluster's gateways reported lies inside
	// it (api.ClusterInside without Mapped); ErrNotFound when nothing was.
	ClusterInside(cid string) (api.ClusterInside, error)

	AccessReader   // access.go
	PolicyReader   // policy.go
	IdentityReader // identity.go
	UsersReader    // users.go
}

// Writer reads and writes inside one transaction.
type Writer interface {
	Reader
	// Touch records that this change concerns topics.
	Touch(topics ...string)
	// CommitVersion is the version this change commits as (the global
	// version is bumped even if no topic is touched): what a document
	// written in the change says it is.
	CommitVersion() (uint64, error)

	PutAccount(model.Account) error // ErrExists when the aid is taken
	PutUser(model.User) error
	PutCluster(model.Cluster) error
	UpdateCluster(model.Cluster) error
	PutNode(model.Node) error
	UpdateNode(model.Node) error
	DeleteNode(cid, nid string) error

	PutService(model.Service) error
	UpdateService(model.Service) error

	PutMove(model.Move) error
	UpdateMove(model.Move) error
	// AddMoveSwitched records a device's key as switched; false if it already was.
	AddMoveSwitched(moveID, publicKey string) (bool, error)

	PutDevice(model.Device) error
	UpdateDevice(model.Device) error
	JoinCluster(deviceID, cid string) (joined bool, err error) // false: already joined
	LeaveCluster(deviceID, cid string) (left bool, err error)

	PutSession(model.Session) error
	UpdateSession(model.Session) error
	// DeleteSessionsEndedBy forgets sessions that ended or expired at or before t.
	DeleteSessionsEndedBy(t time.Time) (int, error)

	// PutClusterInside records (or replaces) what lies inside cid.
	PutClusterInside(cid string, in api.ClusterInside) error

	AccessWriter   // access.go
	PolicyWriter   // policy.go
	IdentityWriter // identity.go
	UsersWriter    // users.go
}
