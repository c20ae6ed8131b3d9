// Package localapi holds the wire types of the daemon's local API (HTTP/JSON
// over a unix socket, a named pipe on Windows) and the Go client that cli/
// and desktop/ use.
//
// Routes (all JSON; errors are {"error": {"code","message","hint"}} as in
// api):
//
//	GET    /v1/status            Status
//	GET    /v1/watch             stream: one Status per line (NDJSON), the current one first,
//	                             then one on every change; never polls
//	POST   /v1/session           SessionRequest: hand a signed-in session to the daemon;
//	                             answers Status (after the device is registered)
//	DELETE /v1/session           disconnect every cluster and end the session on the server
//	POST   /v1/connect           ConnectRequest: join a cluster; answers Status once control
//	                             accepted the join (the handshake follows: watch for peerUp)
//	POST   /v1/disconnect        ConnectRequest: leave a cluster
//	GET    /v1/version           Version
//	GET    /v1/devices           []api.DeviceDetail: the signed-in user's devices (asked of control)
//	DELETE /v1/devices/{id}      remove one of them on control (revoked and deleted; devices.go)
//	GET    /v1/logs              Logs: the daemon's recent log lines (root, the operator, the runos group)
//	GET    /v1/debug/pprof/NAME  a Go runtime profile (heap, allocs, goroutine…) in pprof's format;
//	                             ?debug=1 as text, ?gc=1 collects before a heap profile (as /v1/logs)
//	POST   /v1/probe             ProbeRequest: a fresh WireGuard handshake with a cluster's server
//	                             now; answers ProbeResult (diagnostics: runos vpn doctor)
//
// Reading (GET) is open to every local user; changing state is for root,
// the operator recorded at install and members of the runos group. Every
// Status the daemon answers carries Access: what this caller may do.
package localapi

import (
	"encoding/json"
	"time"
)

// Session states.
const (
	SessionSignedIn  = "signed-in"
	SessionSignedOut = "signed-out"
	SessionExpired   = "expired"
	// SessionRevoked: the device was removed from RunOS (an operator
	// revoked it, or its user removed it): its key is refused, so
	// `runos vpn up` signs in again with a new one.
	SessionRevoked = "revoked"
)

// Cluster connection states.
const (
	ClusterConnecting   = "connecting"
	ClusterConnected    = "connected"
	ClusterDisconnected = "disconnected"
	ClusterError        = "error"
)

// HandshakeFresh is how recent a WireGuard handshake must be for peerUp.
const HandshakeFresh = 180 * time.Second

// Status is the daemon's whole observable state, derived by one function.
type Status struct {
	Seq     uint64 `json:"seq"` // increases on every change
	Version string `json:"version"`
	// Control is the control server the daemon follows (kept after
	// sign-out); "" before the first sign-in.
	Control  string          `json:"control,omitempty"`
	Session  Session         `json:"session"`
	Tunnel   Tunnel          `json:"tunnel"`
	DNS      DNS             `json:"dns"`
	Network  Network         `json:"network"`
	Clusters []ClusterStatus `json:"clusters"` // wanted or reachable clusters, by cid
	Warnings []Warning       `json:"warnings,omitempty"`
	// Access is what the caller of this request may do, decided per
	// request from its kernel-verified identity by the same rule that
	// refuses its changes; nil from a daemon that predates the field (then
	// only a refusal tells).
	Access *Access `json:"access,omitempty"`
	// Metrics are the daemon's counters since it started, in GET
	// /v1/status answers only: they change with every packet, so the
	// derived status (and the watch stream) leaves them out.
	Metrics *Metrics `json:"metrics,omitempty"`
}

// Warning codes. Clients decide by the code, never by a message's words;
// a warning whose code a client does not know is shown by its Message.
const (
	WarnSessionExpiring = "session-expiring" // the session ends within the hour
	WarnSessionExpired  = "session-expired"  // the session lapsed: clusters stay down until `runos vpn up`
	WarnDNS             = "dns"              // split DNS failed; the same error is in DNS.Error
	WarnDeviceRevoked   = "device-revoked"   // the device was removed from RunOS: `runos vpn up` signs in again with a new key
	// Done here, not yet at control (it was unreachable): the daemon
	// retries until control answers, or the session lapses anyway.
	WarnSignOutPending = "sign-out-pending" // "sign-out pending at control: …"
	WarnLeavePending   = "leave-pending"    // "leaving xym pending at control: …"
	// WarnCaptivePortal: the network holds back UDP and HTTPS until its
	// sign-in page is done (plain HTTP is redirected to it).
	WarnCaptivePortal = "captive-portal"
	// WarnNotSaved: the daemon could not write its state directory (the
	// session and wanted clusters would not survive a restart); retried.
	WarnNotSaved = "not-saved"
)

// Paths of a cluster's WireGuard datagrams (ClusterStatus.Path).
const (
	PathDirect = "direct" // UDP to the node's VPN port
	PathRelay  = "relay"  // WireGuard over the node's HTTPS relay, where UDP gets no answer
)

// CaptivePortalMessage is what status and RunOS Desktop say while a
// captive portal holds the network.
const CaptivePortalMessage = "the network needs a sign-in page first"

// Warning is something the user should know about the daemon's state.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// UnmarshalJSON also takes a bare string, as daemons sent before warnings
// had codes: a newer client still reads an older daemon (code "").
func (w *Warning) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*w = Warning{}
		return json.Unmarshal(b, &w.Message)
	}
	type plain Warning // without this method
	return json.Unmarshal(b, (*plain)(w))
}

// Access is what a caller may do through the local API.
type Access struct {
	// Control: the caller may change state (hand over a session, connect,
	// disconnect, down); false: it may only read.
	Control bool `json:"control"`
	// ChangeControl: the caller may also point the daemon at another
	// control server (root and the operator recorded at install).
	ChangeControl bool   `json:"changeControl,omitempty"`
	Reason        string `json:"reason,omitempty"` // why, in the daemon's words
	Hint          string `json:"hint,omitempty"`   // without control: what grants it
}

// Session is the sign-in the daemon holds.
type Session struct {
	State     string    `json:"state"`     // signed-in, signed-out, expired or revoked
	User      string    `json:"user"`      // "" when signed out
	ExpiresAt time.Time `json:"expiresAt"` // null when signed out (see MarshalJSON)
	APIURL    string    `json:"apiUrl,omitempty"`
	DeviceID  string    `json:"deviceId,omitempty"`
	Error     string    `json:"error,omitempty"`    // e.g. control unreachable
	RevokedAt time.Time `json:"revokedAt,omitzero"` // state revoked: when the device was removed
}

// Tunnel is the wg1 interface.
type Tunnel struct {
	Interface string   `json:"interface"` // wg1
	Up        bool     `json:"up"`
	Addresses []string `json:"addresses"` // the device's tunnel address(es), CIDR
	PublicKey string   `json:"publicKey,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// DNS is the split-DNS state.
type DNS struct {
	Mode   string `json:"mode"`             // e.g. systemd-resolved, resolv.conf, resolver-files, nrpt, off
	Reason string `json:"reason,omitempty"` // why that mode was chosen
	Error  string `json:"error,omitempty"`
	// Rewrites is how often another program (NetworkManager, a DHCP
	// client, resolvconf) rewrote the resolver configuration behind the
	// daemon within the last ten minutes; the daemon re-applied it each
	// time until it gave up (then Error says so).
	Rewrites int `json:"rewrites,omitempty"`
}

// Network is the laptop's uplink as the daemon last saw it change.
type Network struct {
	Uplink    string    `json:"uplink"`    // its default route and addresses, in one line ("" unknown)
	MTU       int       `json:"mtu"`       // the uplink's MTU: the smallest on the routes to the VPN servers, else of the uplinks (0 unknown)
	ChangedAt time.Time `json:"changedAt"` // null before a change was seen (see MarshalJSON)
	// WokeAt is when the daemon last found it had slept (the laptop
	// suspended, or the daemon held still); null when it has not.
	WokeAt time.Time `json:"wokeAt"`
}

// MarshalJSON writes zero times as null.
func (n Network) MarshalJSON() ([]byte, error) {
	type plain Network
	return json.Marshal(struct {
		plain
		ChangedAt *time.Time `json:"changedAt"`
		WokeAt    *time.Time `json:"wokeAt"`
	}{plain(n), timeOrNull(n.ChangedAt), timeOrNull(n.WokeAt)})
}

// Server is a cluster's VPN server as the device sees it.
type Server struct {
	NodeID    string `json:"nodeId"`
	Endpoint  string `json:"endpoint"`
	PublicKey string `json:"publicKey"`
	Address   string `json:"address"` // the VPN server's address inside the cluster's subnet
}

// ClusterDNS is how a connected cluster's names resolve.
type ClusterDNS struct {
	Server  string   `json:"server"`
	Domains []string `json:"domains"`
}

// ClusterStatus is one cluster's connection.
type ClusterStatus struct {
	CID    string `json:"cid"`
	Name   string `json:"name,omitempty"`
	State  string `json:"state"`  // connecting, connected, disconnected or error
	Wanted bool   `json:"wanted"` // the user asked for it
	PeerUp bool   `json:"peerUp"` // the server answers: a handshake within HandshakeFresh, since the last network change or wake, and no 15 s silence while sending, read from the device
	// Path is how the cluster's WireGuard datagrams travel: PathDirect
	// (UDP) or PathRelay (the node's HTTPS relay); "" while no peer is
	// configured. PathReason says why it took that path.
	Path          string     `json:"path"`
	PathReason    string     `json:"pathReason,omitempty"`
	Relay         string     `json:"relay,omitempty"` // the node's relay URL, when control gives one
	LastHandshake time.Time  `json:"lastHandshake"`   // null before the first (see MarshalJSON)
	Server        Server     `json:"server"`
	Subnet        string     `json:"subnet,omitempty"`
	DNS           ClusterDNS `json:"dns"`
	Error         string     `json:"error"` // "" when there is none
	// Reach is what the laptop routes into the cluster beyond its VPN
	// server (issue 21); nil when the cluster declares nothing inside.
	Reach *ClusterReach `json:"reach,omitempty"`
	// Kept is set while the cluster runs on a configuration control sent
	// earlier, because control does not answer now (or has not since the
	// daemon started, which then used the configuration it kept on disk).
	Kept *KeptConfig `json:"kept,omitempty"`
}

// ClusterReach says, for one cluster, which of its internal ranges the
// laptop routes to it directly, which are shadowed (by the default
// cluster, another cluster, or the laptop's own network), and the mapped
// range under which all of them are reachable whatever shadows them (the
// names of the cluster resolve into it).
type ClusterReach struct {
	Default  bool            `json:"default"` // the default cluster: raw ranges and *.svc.cluster.local go here first
	Routed   []string        `json:"routed"`
	Shadowed []ShadowedRange `json:"shadowed"`
	Mapped   string          `json:"mapped,omitempty"` // the cluster's mapped IPv6 /96
	Refused  []string        `json:"refused,omitempty"`
}

// ShadowedRange is an internal range not routed to its cluster, and why.
type ShadowedRange struct {
	Prefix string `json:"prefix"`
	By     string `json:"by"` // a cid, or "the local network (<iface> <prefix>)"
}

// KeptConfig says a cluster runs without control: since when control has
// not answered, and when it sent the configuration in use.
type KeptConfig struct {
	ControlUnreachableSince time.Time `json:"controlUnreachableSince"`
	ConfigurationOf         time.Time `json:"configurationOf"`
	// Message is both in words, as status and the desktop show them:
	// "control unreachable since 2026-12-04 17:02 UTC; using the
	// configuration of 2026-12-04 16:58 UTC".
	Message string `json:"message"`
}

// The status's documented fields are always in its JSON, so a script can
// index them in every state; a time not yet known is null rather than
// Go's zero time (year 1). Decoding takes null as the zero time.

// MarshalJSON writes a zero ExpiresAt as null.
func (s Session) MarshalJSON() ([]byte, error) {
	type plain Session
	return json.Marshal(struct {
		plain
		ExpiresAt *time.Time `json:"expiresAt"`
	}{plain(s), timeOrNull(s.ExpiresAt)})
}

// MarshalJSON writes a zero LastHandshake as null.
func (c ClusterStatus) MarshalJSON() ([]byte, error) {
	type plain ClusterStatus
	return json.Marshal(struct {
		plain
		LastHandshake *time.Time `json:"lastHandshake"`
	}{plain(c), timeOrNull(c.LastHandshake)})
}

func timeOrNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// SessionRequest hands a session obtained by the CLI or desktop to the daemon.
type SessionRequest struct {
	APIURL      string    `json:"apiUrl"`
	AccessToken string    `json:"accessToken"`
	ExpiresAt   time.Time `json:"expiresAt"`
	User        string    `json:"user,omitempty"`
}

// ConnectRequest names a cluster.
type ConnectRequest struct {
	CID string `json:"cid"`
	// Default is the cluster the user works on (runos config set cid), as
	// the CLI knows it: raw internal addresses and *.svc.cluster.local go
	// to it first (issue 21). "" leaves the daemon's as it was.
	Default string `json:"default,omitempty"`
}

// Version is the daemon's build.
type Version struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Date    string `json:"date"`
}

// Error codes of the local API.
const (
	CodeForbidden = "forbidden"  // caller may only read
	CodeSignedOut = "signed_out" // needs `runos vpn up`
	CodeInvalid   = "invalid"
	CodeNotFound  = "not_found"
	CodeControl   = "control" // control refused or failed; message says why
)
