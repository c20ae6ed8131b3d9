// Package model holds runos-control's domain records as the store keeps
// them, with the few facts derived from a record alone (a node's ingress
// address and status, an address's kind, a cluster's domain). Rules that
// look at several records live in control/rules.
package model

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/runos/vpn/api"
)

// Account is an account (aid).
type Account struct {
	AID  string
	Name string
	// OperatorTokenHash is where schema 1 kept the world file's operator
	// token. Since migration 2 every operator token is an APIToken (the
	// world file's too) and nothing writes or reads this.
	OperatorTokenHash string
}

// User signs in with email and password.
type User struct {
	Email        string
	PasswordHash string // bcrypt
	Accounts     []string
	// Operates are the accounts of Accounts where the user has the
	// operator role: the operator verbs reach those accounts' clusters,
	// never the other accounts the user merely belongs to.
	Operates []string
}

// InAccount reports whether the user belongs to aid.
func (u User) InAccount(aid string) bool { return slices.Contains(u.Accounts, aid) }

// OperatorOf reports whether the user has the operator role in aid.
func (u User) OperatorOf(aid string) bool {
	return u.InAccount(aid) && slices.Contains(u.Operates, aid)
}

// Cluster is a cluster (cid) of an account.
type Cluster struct {
	CID           string
	AID           string
	Name          string
	DomainRoot    string
	IsConfigured  bool
	UserVPN       string // "", wireguard or netbird
	CustomDomains []string
}

// Domain is the cluster's built-in domain, <cid>.<aid>.<root>.
func (c Cluster) Domain() string { return c.CID + "." + c.AID + "." + c.DomainRoot }

// Domains are the names the cluster's DNS answers: the built-in domain
// first, then the custom domains.
func (c Cluster) Domains() []string {
	return append([]string{c.Domain()}, c.CustomDomains...)
}

// Node is a node of a cluster.
type Node struct {
	CID                 string
	NID                 string
	Name                string
	Roles               []string
	DeclaredIngress     netip.Addr // set by the world file or `runos nodes ingress`
	PublicIP            netip.Addr // public address given by the world file
	DetectedIP          netip.Addr // the gateway's source address as control sees it
	Published           bool       // in the public DNS records
	EnrollmentTokenHash string
	LastHeartbeat       time.Time
	GatewayKey          string // the gateway's public key, as last reported
	GatewayVersion      string
	GatewayStartedAt    time.Time // when its gateway last started, as it reported while listening
}

// IsControlPlane reports whether the node carries the control-plane role.
func (n Node) IsControlPlane() bool { return slices.Contains(n.Roles, api.RoleControlPlane) }

// Public is the node's public address: the world file's, else the one
// detected from its gateway's connections.
func (n Node) Public() netip.Addr {
	if n.PublicIP.IsValid() {
		return n.PublicIP
	}
	return n.DetectedIP
}

// Ingress is the address devices dial: the declared ingress address, else
// the detected public address (the product docs' fallback). It is the zero
// Addr when the node has neither.
func (n Node) Ingress() netip.Addr {
	if n.DeclaredIngress.IsValid() {
		return n.DeclaredIngress
	}
	return n.Public()
}

// WithHeartbeat returns n with its last heartbeat at t.
func (n Node) WithHeartbeat(t time.Time) Node {
	n.LastHeartbeat = t
	return n
}

// Status is derived from the heartbeats: ready while they arrive,
// no_heartbeat once timeout has passed since the last one (or before the
// first). rules.Heartbeats adds control's own outage to it.
func (n Node) Status(now time.Time, timeout time.Duration) string {
	if n.LastHeartbeat.IsZero() || now.Sub(n.LastHeartbeat) >= timeout {
		return api.NodeNoHeartbeat
	}
	return api.NodeReady
}

// AddressKind says whether devices dialing addr reach a private or a public
// address: api.AddressKind, the one rule (docs/internals.md "Addresses").
func AddressKind(addr netip.Addr) string { return api.AddressKind(addr) }

// Dialable reports whether devices could dial addr at all: a unicast
// address that is not loopback, link-local or unspecified.
func Dialable(addr netip.Addr) bool {
	a := addr.Unmap()
	return a.IsValid() && !a.IsUnspecified() && !a.IsLoopback() && !a.IsMulticast() &&
		!a.IsLinkLocalUnicast() && !a.IsInterfaceLocalMulticast()
}

// Service is a cluster's WireGuard user-VPN server.
type Service struct {
	ID          string
	CID         string
	Name        string
	NodeID      string // the hosting node
	Port        int
	State       string // installing, serving, failed
	Error       string
	PublicKey   string // the hosting gateway's key once it reported listening
	SubnetIndex int    // which /24 of the service pool
	Subnet      netip.Prefix
	CreatedAt   time.Time
	Seeded      bool   // from the world file: no install deadline
	RelayURL    string // overrides the default relay URL ("" none); {ingress} is the hosting node's ingress address
}

// Address is the VPN server's address: the first host of its subnet. It
// belongs to the service, so a move changes it nowhere.
func (s Service) Address() netip.Addr { return s.Subnet.Addr().Next() }

// Move is a move of a service to another node.
type Move struct {
	ID             string
	CID            string
	ServiceID      string
	FromNodeID     string
	TargetNodeID   string
	State          string // preparing, switching, done, failed
	Error          string
	Endpoint       string
	AddressKind    string
	Warnings       []string
	Total          int // devices joined with a live session at the switch
	Switched       int // of those, how many handshaked with the target
	SwitchMs       int64
	PrepareVersion uint64 // the version that asked the target to stand by
	StartedAt      time.Time
	SwitchedAt     time.Time
	LastHandshake  time.Time
	FinishedAt     time.Time
	Steps          []api.MoveStep
}

// InFlight reports whether the move is still preparing or switching.
func (m Move) InFlight() bool { return m.State == api.MovePreparing || m.State == api.MoveSwitching }

// Device is a registered device (one public key).
type Device struct {
	ID        string
	User      string
	Name      string
	OS        string
	PublicKey string
	AddrIndex int // offset of Address inside the device pool
	Address   netip.Addr
	SessionID string // the session bound to the device (the last to register it)
	CreatedAt time.Time

	LastSeen      time.Time // control last heard from it (written at most every few minutes)
	LastHandshake time.Time // the newest handshake any gateway reported for it
	RevokedAt     time.Time // zero unless revoked (access.go)
	RevokedBy     string
}

// Session states.
const (
	SessionLive    = "live"
	SessionEnded   = "ended"   // DELETE /v1/sessions/current
	SessionExpired = "expired" // its expiry passed (acted on at that instant)
)

// Session is a sign-in.
type Session struct {
	ID        string
	TokenHash string // hex SHA-256 of the access token
	User      string
	ClientID  string
	State     string
	CreatedAt time.Time
	ExpiresAt time.Time
	EndedAt   time.Time // when it ended or expired
}

// LiveAt reports whether the session is live at now.
func (s Session) LiveAt(now time.Time) bool {
	return s.State == SessionLive && now.Before(s.ExpiresAt)
}

// Peer is a device a cluster's VPN server must accept.
type Peer struct {
	DeviceID  string
	PublicKey string
	Address   netip.Addr
	User      string    // the device's user's email: whose policy rules it gets
	ExpiresAt time.Time // the device's session's end
}

// NormalizeDomain lowercases a domain and drops a trailing dot.
func NormalizeDomain(d string) string { return strings.TrimSuffix(strings.ToLower(d), ".") }
