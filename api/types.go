// Package api holds the wire types of runos-control's HTTPS/JSON API under /v1
// and the Go client that cli/, vpnd/ and gateway/ share.
//
// Three kinds of caller authenticate with "Authorization: Bearer <token>":
//   - users and their devices, with the access token of a sign-in (24 hours);
//   - operators, with the same kind of token (their user has the operator role
//     on the account) or with the account's operator API token (RUNOS_TOKEN);
//   - gateways, with their node's enrollment token.
//
// Errors are {"error": {"code": "...", "message": "...", "hint": "..."}} with a
// matching HTTP status; see Error.
package api

import "time"

// Error is the body of every non-2xx answer (wrapped as {"error": Error}).
// Code is stable and machine-readable; Message names the rule in plain words;
// Hint says what to do instead. The client returns it as a Go error.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	// At is when what the error reports began, where that is known: a
	// device's revocation, a token's expiry.
	At time.Time `json:"at,omitzero"`
	// Details are the error's parts, one a line, where there are several:
	// each bad line of a policy document.
	Details []string `json:"details,omitempty"`
}

// Error codes shared by server and clients.
const (
	CodeUnauthorized   = "unauthorized"    // no or unknown token (401)
	CodeSessionExpired = "session_expired" // the sign-in lapsed (401)
	CodeForbidden      = "forbidden"       // authenticated, not allowed (403)
	CodeNotFound       = "not_found"       // unknown cid, nid, device, service, move (404)
	CodeInvalid        = "invalid"         // malformed request (400)
	CodeRefused        = "refused"         // an operator rule refuses it (409)
	CodeConflict       = "conflict"        // state does not allow it right now (409)
	CodeUnavailable    = "unavailable"     // a dependency (gateway) is not there (503)
	CodeTooMany        = "too_many"        // the caller holds its allowance of streams and long-polls (429)
)

func (e *Error) Error() string {
	s := e.Message
	if s == "" {
		s = e.Code
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// ErrorBody is the JSON envelope of an Error.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// Roles of a node.
const (
	RoleControlPlane = "control-plane"
	RoleWorker       = "worker"
)

// Node statuses, derived from the gateway's heartbeats.
const (
	NodeReady       = "ready"
	NodeNoHeartbeat = "no_heartbeat"
)

// User VPN kinds of a cluster: mutually exclusive.
const (
	UserVPNNone      = ""
	UserVPNWireGuard = "wireguard"
	UserVPNNetBird   = "netbird"
)

// Address kinds of an endpoint the devices are given.
const (
	AddressPrivate = "private"
	AddressPublic  = "public"
)

// DefaultVPNPort is the UDP port of a cluster's WireGuard VPN server.
const DefaultVPNPort = 32768

// The VPN's address pools as runos-control hands them out by default
// (--device-pool, --service-pool). The daemon accepts routes and addresses
// from control only inside these, unless its own configuration says
// otherwise (runos vpnd --allowed-routes).
const (
	DefaultDevicePool  = "100.96.0.0/16"  // one address per device
	DefaultServicePool = "100.100.0.0/16" // one /24 per cluster's VPN service
)

// Me is GET /v1/me: who the bearer token belongs to.
type Me struct {
	User      string    `json:"user"` // email
	Accounts  []string  `json:"accounts"`
	Operator  bool      `json:"operator"`           // may use the operator verbs on some account
	Operates  []string  `json:"operates,omitempty"` // the accounts where it may
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	SessionID string    `json:"sessionId,omitempty"`
	// May are the account-wide operator actions (manage-users,
	// manage-tokens, set-policy, read-audit) that an `operate … -> *:`
	// rule of an account's policy grants a signed-in user, by account; an
	// account in Operates holds them all and is not listed.
	May map[string][]string `json:"may,omitempty"`
}

// Cluster is one entry of GET /v1/clusters.
type Cluster struct {
	CID          string `json:"cid"`
	AID          string `json:"aid"`
	Name         string `json:"name"`
	Domain       string `json:"domain"` // <cid>.<aid>.<root>
	IsConfigured bool   `json:"isConfigured"`
	UserVPN      string `json:"userVpn"` // "", "wireguard" or "netbird"
}

// DNSRecord is a public DNS record control keeps for a cluster.
type DNSRecord struct {
	Name   string   `json:"name"` // k8s.<cid>.<aid>.<root> or *.<cid>.<aid>.<root>
	Type   string   `json:"type"` // A or AAAA
	Values []string `json:"values"`
}

// ClusterDetail is GET /v1/clusters/{cid}.
type ClusterDetail struct {
	Cluster
	CustomDomains []string     `json:"customDomains,omitempty"`
	DNSRecords    []DNSRecord  `json:"dnsRecords"`
	Nodes         []Node       `json:"nodes"`
	VPNServices   []VPNService `json:"vpnServices"`
	DevicePool    *PoolUsage   `json:"devicePool,omitempty"` // operators only (access.go)
	// Inside is what its gateways reported lies inside the cluster (nil:
	// nothing reported yet), with the cluster's mapped range.
	Inside *ClusterInside `json:"inside,omitempty"`
}

// Node is a node of a cluster.
type Node struct {
	NID               string    `json:"nid"`
	CID               string    `json:"cid"`
	Name              string    `json:"name"`
	Roles             []string  `json:"roles"`
	Status            string    `json:"status"`    // ready or no_heartbeat
	IngressIP         string    `json:"ingressIp"` // declared, else detected public (what devices dial)
	DeclaredIngressIP string    `json:"declaredIngressIp,omitempty"`
	PublicIP          string    `json:"publicIp,omitempty"` // detected public address
	Published         bool      `json:"published"`          // in the public DNS records
	HostsVPN          bool      `json:"hostsVpn"`
	LastHeartbeat     time.Time `json:"lastHeartbeat,omitzero"`
}

// NodeIngressRequest is PUT /v1/clusters/{cid}/nodes/{nid}/ingress.
type NodeIngressRequest struct {
	IngressIP string `json:"ingressIp,omitempty"`
	Published *bool  `json:"published,omitempty"`
}

// DeletePreflight is GET /v1/clusters/{cid}/nodes/{nid}/delete-preflight.
type DeletePreflight struct {
	Warnings []string `json:"warnings"` // advisory only; never blocks
	Refusals []string `json:"refusals"` // what DELETE would refuse, and why
}

// VPN service states.
const (
	ServiceInstalling = "installing" // waiting for the target gateway
	ServiceServing    = "serving"
	ServiceFailed     = "failed"
)

// VPNService is a cluster's WireGuard user-VPN server.
type VPNService struct {
	ID          string `json:"id"`
	CID         string `json:"cid"`
	Name        string `json:"name"`
	NodeID      string `json:"nodeId"`
	Port        int    `json:"port"`
	State       string `json:"state"`
	Error       string `json:"error,omitempty"`
	PublicKey   string `json:"publicKey,omitempty"` // the hosting gateway's key
	Endpoint    string `json:"endpoint,omitempty"`  // ingress address:port devices dial
	AddressKind string `json:"addressKind,omitempty"`
	Subnet      string `json:"subnet"`  // the cluster's VPN subnet, CIDR
	Address     string `json:"address"` // the server's address inside Subnet
	Devices     int    `json:"devices"` // connected devices (joined, live session)
	Version     uint64 `json:"version"` // for long-polling with ?since=
	// LatestMoveID is the service's newest move (in flight or not), for
	// following its progress (GET /v1/moves/{id}); "" if it never moved.
	LatestMoveID string `json:"latestMoveId,omitempty"`
	// RelayURL overrides the default relay URL devices are given
	// (https://<ingress>/runos-vpn/relay); "" means the default. {ingress}
	// in it stands for the hosting node's ingress address, so the relay
	// follows a move.
	RelayURL string `json:"relayUrl,omitempty"`
	Relay    string `json:"relay,omitempty"` // the relay URL devices are given now
}

// SetRelayRequest is PUT /v1/clusters/{cid}/services/wireguard/{id}/relay.
type SetRelayRequest struct {
	RelayURL string `json:"relayUrl"` // "" puts the default back
}

// AddVPNServiceRequest is POST /v1/clusters/{cid}/services/wireguard.
type AddVPNServiceRequest struct {
	Name         string `json:"name"`
	TargetNodeID string `json:"targetNodeId"`
	Port         int    `json:"port,omitempty"`     // 0 means DefaultVPNPort
	RelayURL     string `json:"relayUrl,omitempty"` // see VPNService.RelayURL
}

// MoveRequest is the body of .../services/wireguard/{id}/move-plan and .../moves.
type MoveRequest struct {
	TargetNodeID string `json:"targetNodeId"`
}

// MovePlan says, before anything moves, what devices will be given.
type MovePlan struct {
	FromNodeID          string   `json:"fromNodeId"`
	TargetNodeID        string   `json:"targetNodeId"`
	Endpoint            string   `json:"endpoint"`
	AddressKind         string   `json:"addressKind"` // private or public
	PreviousEndpoint    string   `json:"previousEndpoint"`
	PreviousAddressKind string   `json:"previousAddressKind"`
	Warnings            []string `json:"warnings"`
}

// Move states.
const (
	MovePreparing = "preparing" // target gateway bringing the server up
	MoveSwitching = "switching" // devices told; waiting for their handshakes
	MoveDone      = "done"
	MoveFailed    = "failed"
)

// MoveDevices counts devices switched to the new node.
type MoveDevices struct {
	Total    int `json:"total"`
	Switched int `json:"switched"`
}

// MoveStep is one line of a move's progress.
type MoveStep struct {
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// Move is a move of a VPN service to another node (GET /v1/moves/{id}).
type Move struct {
	ID           string      `json:"id"`
	CID          string      `json:"cid"`
	ServiceID    string      `json:"serviceId"`
	FromNodeID   string      `json:"fromNodeId"`
	TargetNodeID string      `json:"targetNodeId"`
	State        string      `json:"state"`
	Error        string      `json:"error,omitempty"`
	Endpoint     string      `json:"endpoint"`
	AddressKind  string      `json:"addressKind"`
	Warnings     []string    `json:"warnings"`
	Devices      MoveDevices `json:"devices"`
	SwitchMs     int64       `json:"switchMs"` // from control taking the move to the last device's handshake; 0 until then
	StartedAt    time.Time   `json:"startedAt"`
	FinishedAt   time.Time   `json:"finishedAt,omitzero"`
	Steps        []MoveStep  `json:"steps"`
	Version      uint64      `json:"version"`
}

// RegisterDeviceRequest is POST /v1/devices. Only the public key is sent.
// Registering the same public key again returns the same device. The
// caller's session is bound to the device.
type RegisterDeviceRequest struct {
	PublicKey string `json:"publicKey"` // base64 WireGuard public key
	Name      string `json:"name"`      // hostname
	OS        string `json:"os"`        // runtime.GOOS
}

// Device is a registered device.
type Device struct {
	ID        string `json:"id"`
	User      string `json:"user"`
	Name      string `json:"name"`
	OS        string `json:"os"`
	PublicKey string `json:"publicKey"`
	Address   string `json:"address"` // the device's one tunnel address, e.g. 100.96.0.2
}

// VPNConfig is what a device needs to reach a cluster's VPN server.
// Ready is false while the service has no serving gateway (no key yet).
type VPNConfig struct {
	ServiceID string   `json:"serviceId"`
	NodeID    string   `json:"nodeId"`
	PublicKey string   `json:"publicKey"`
	Endpoint  string   `json:"endpoint"` // ip:port
	Subnet    string   `json:"subnet"`   // CIDR, routed through wg1
	Address   string   `json:"address"`  // the VPN server's address inside Subnet
	DNS       string   `json:"dns"`      // cluster DNS server (the VPN server's address)
	Domains   []string `json:"domains"`  // names that resolve through the tunnel
	Ready     bool     `json:"ready"`
	// ServerStartedAt is when the serving node's gateway last started:
	// when it changes while the key stays, the server has forgotten every
	// device's session and devices handshake again at once.
	ServerStartedAt time.Time `json:"serverStartedAt,omitzero"`
	// Relay is the HTTPS URL of the hosting node's relay (WireGuard over
	// a WebSocket on 443, for networks that let no UDP through): by
	// default https://<ingress>/runos-vpn/relay, else the service's
	// RelayURL with {ingress} put in. A move changes it with the node.
	Relay string `json:"relay,omitempty"`
}

// ClusterConfig is one cluster a device has joined.
type ClusterConfig struct {
	CID    string    `json:"cid"`
	AID    string    `json:"aid"`
	Name   string    `json:"name"`
	Domain string    `json:"domain"`
	VPN    VPNConfig `json:"vpn"`
	// Inside is what the device may reach inside the cluster through its
	// VPN node, and the cluster's mapped range (nil: nothing declared).
	Inside *ClusterInside `json:"inside,omitempty"`
}

// SessionInfo describes the sign-in a token belongs to.
type SessionInfo struct {
	ID        string    `json:"id"`
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// DeviceMap is GET /v1/devices/{id}/map: everything a device's daemon needs,
// versioned for the long-poll.
type DeviceMap struct {
	Version  uint64          `json:"version"`
	Device   Device          `json:"device"`
	Session  SessionInfo     `json:"session"`
	Clusters []ClusterConfig `json:"clusters"` // joined clusters, by cid
}

// GatewayPeer is a device the VPN server must accept.
type GatewayPeer struct {
	DeviceID  string `json:"deviceId"`
	PublicKey string `json:"publicKey"`
	Address   string `json:"address"` // device tunnel address (allowed IP /32)
	// User and Groups are whose policy rules the device's packets are
	// checked against (set when the account has a policy).
	User   string   `json:"user,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// ExpiresAt is when the device's session ends: a gateway serving from
	// the map it kept (control unreachable) drops the peer then.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// Gateway roles for the service a gateway serves.
const (
	GatewayActive   = "active"   // devices are told to dial this node
	GatewayStandby  = "standby"  // target of a move: come up, report ready
	GatewayDraining = "draining" // old node of a move: keep serving until told to stop
)

// GatewayService is the VPN server a gateway must run.
type GatewayService struct {
	ServiceID  string        `json:"serviceId"`
	CID        string        `json:"cid"`
	Role       string        `json:"role"`
	MoveID     string        `json:"moveId,omitempty"`
	Port       int           `json:"port"`
	Subnet     string        `json:"subnet"`     // cluster VPN subnet, CIDR
	Address    string        `json:"address"`    // server address inside Subnet
	DevicePool string        `json:"devicePool"` // route replies to devices through the interface
	Domains    []string      `json:"domains"`    // names the cluster DNS answers with Address
	Peers      []GatewayPeer `json:"peers"`
	// Policy is the account's access policy document (control/policy's
	// format) the gateway enforces on every packet from a device; empty:
	// the account has none, and devices reach everything.
	Policy string `json:"policy,omitempty"`
	// Inside is the cluster's inside as control keeps it, with Mapped:
	// the range the gateway translates back (nil: nothing declared).
	Inside *ClusterInside `json:"inside,omitempty"`
}

// GatewayMap is GET /v1/gateway/map: what a node's gateway must do.
type GatewayMap struct {
	Version uint64          `json:"version"`
	NodeID  string          `json:"nodeId"`
	CID     string          `json:"cid"`
	Serve   *GatewayService `json:"serve,omitempty"` // nil: serve nothing
}

// PeerHandshake is a device's latest handshake seen by a gateway.
type PeerHandshake struct {
	PublicKey string    `json:"publicKey"`
	At        time.Time `json:"at"`
}

// GatewayReport is POST /v1/gateway/report: heartbeat plus facts. Gateways
// send it on every change they see and as a heartbeat (every 10 s).
type GatewayReport struct {
	PublicKey  string          `json:"publicKey"`
	Version    string          `json:"version"`
	PublicIP   string          `json:"publicIp,omitempty"` // detected
	ServiceID  string          `json:"serviceId,omitempty"`
	Listening  bool            `json:"listening"` // UDP socket bound, interface up
	ListenPort int             `json:"listenPort,omitempty"`
	MapVersion uint64          `json:"mapVersion"` // the GatewayMap this report reflects
	Error      string          `json:"error,omitempty"`
	Handshakes []PeerHandshake `json:"handshakes,omitempty"`
	// StartedAt is when this gateway process started (the same in every
	// report of one run): a new value for the hosting node tells its
	// devices the server restarted.
	StartedAt time.Time `json:"startedAt,omitzero"`
	// Inside is what the node's configuration says lies inside the
	// cluster (nil: not configured); Mapped is never sent.
	Inside *ClusterInside `json:"inside,omitempty"`
}

// RelayTicket is POST /v1/devices/{id}/clusters/{cid}/relay-ticket: what
// a device shows the relay of the node serving the cluster's VPN, instead
// of its session token. It is good for that device, cluster and node
// only, until ExpiresAt (minutes), and only while the device's session is
// live; control signs it, so any replica checks it.
type RelayTicket struct {
	Ticket    string    `json:"ticket"`
	NodeID    string    `json:"nodeId"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// RelayCheckRequest is POST /v1/gateway/relay-check: the gateway of the
// node serving a cluster's VPN asks whether a device may open a relay
// stream to it, with what the device presented (its relay ticket and
// public key). The gateway keeps neither.
type RelayCheckRequest struct {
	Ticket    string `json:"ticket"`
	PublicKey string `json:"publicKey"`
}

// RelayCheck is control's yes: the session is live, the key is that
// session's device, and the device has joined the gateway's cluster.
type RelayCheck struct {
	DeviceID  string    `json:"deviceId"`
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// OAuth client ids known to control.
const (
	ClientCLI     = "runos-cli"
	ClientDesktop = "runos-desktop"
	ClientConsole = "runos-console" // control's own web page, /console
)

// Query parameters of the long-polls.
const (
	ParamSince = "since" // last version seen; answer when newer
	ParamWait  = "wait"  // seconds to hold the request; default 60, max 300
)
