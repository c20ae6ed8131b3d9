// Package policy is an account's access policy: its groups of users and
// the rules saying which groups may connect to which cluster, what they may
// reach inside it (addresses, prefixes, ports, protocols), and who may use
// the operator verbs (moving services, revoking devices …). One document
// per account, in a small line format meant to be read and edited by hand:
//
//	# RunOS access policy of account rjwrn
//	version 4
//
//	group oncall: ada@example.com, bob@example.com
//
//	allow group:oncall -> ky3: *
//	allow * -> staging: *
//	allow group:contractors -> ky3: 10.96.0.20:5432/tcp, 10.96.1.0/24:80-443
//	operate group:oncall -> ky3: move-services, revoke-devices
//
// It parses and validates a document (every error names its line), refuses
// a document older than the one in force, decides a question — may this
// user connect to ky3, reach 10.96.0.20:5432/tcp there, revoke a device —
// naming the rule that decided, and compiles a user's rules for one cluster
// into the tables a gateway checks each packet against.
//
// It is pure: no I/O, no clock, no store. Where the document is kept, who
// may set it, how it reaches the gateways and how the identity provider's
// groups land in a Subject are control's business, not this package's.
package policy

import (
	"net/netip"
)

// Policy is a parsed document.
type Policy struct {
	Version uint64
	Groups  []Group // defined in the document, in its order
	Rules   []Rule  // allow and operate rules, in the document's order
}

// Group is a group defined in the document with its members' emails.
// Groups can also come from the identity provider's claim; those need no
// line here, only a place in the known groups given to Validate.
type Group struct {
	Line    int
	Name    string
	Members []string // lowercase emails
}

// Kind is what a rule grants.
type Kind uint8

const (
	// Allow lets its principals connect to the cluster and reach its
	// destinations there.
	Allow Kind = iota + 1
	// Operate lets its principals use the operator actions it names.
	Operate
)

func (k Kind) String() string {
	if k == Operate {
		return "operate"
	}
	return "allow"
}

// AnyCluster is the cluster of a rule for every cluster of the account.
const AnyCluster = "*"

// Rule is one allow or operate line.
type Rule struct {
	Line       int
	Kind       Kind
	Principals []Principal
	Cluster    string   // a cid, or AnyCluster
	Dests      []Dest   // Allow: what may be reached
	Actions    []Action // Operate: the operator actions
}

// Principal is who a rule is for.
type Principal struct {
	// Group names a group, User an email (lowercase); both empty: every
	// user of the account ("*").
	Group string
	User  string
}

// Everyone reports whether the principal is "*".
func (p Principal) Everyone() bool { return p.Group == "" && p.User == "" }

// Proto is the protocol a destination is limited to.
type Proto uint8

const (
	AnyProto Proto = iota
	TCP
	UDP
	ICMP // ICMP for IPv4, ICMPv6 for IPv6
)

var protoNames = [...]string{AnyProto: "", TCP: "tcp", UDP: "udp", ICMP: "icmp"}

func (p Proto) String() string {
	if int(p) < len(protoNames) {
		return protoNames[p]
	}
	return "?"
}

// Dest is a destination inside a cluster: an address range, a port range
// and a protocol. The zero Prefix is every address (IPv4 and IPv6).
type Dest struct {
	Prefix netip.Prefix
	// PortLo..PortHi, inclusive; 0..65535 when the line names no port.
	PortLo, PortHi uint16
	Proto          Proto
}

// AllPorts reports whether the destination names no port.
func (d Dest) AllPorts() bool { return d.PortLo == 0 && d.PortHi == 65535 }

// Action is an operator verb a rule may grant.
type Action string

// The operator actions. The first are per cluster; the account-wide ones
// (AccountWide) need a rule for every cluster ("-> *:").
const (
	MoveServices  Action = "move-services"  // add, move, relay a cluster's VPN services
	RevokeDevices Action = "revoke-devices" // revoke and delete devices, end sessions
	ManageNodes   Action = "manage-nodes"   // set a node's ingress, remove a node
	ManageUsers   Action = "manage-users"   // groups and users
	ManageTokens  Action = "manage-tokens"  // list and revoke operator API tokens (control creates none by a rule)
	SetPolicy     Action = "set-policy"     // this document
	ReadAudit     Action = "read-audit"     // the audit log
	// AllActions in an operate rule ("*") grants every action.
	AllActions Action = "*"
)

// Actions are the operator actions, in the order shown in errors.
var Actions = []Action{MoveServices, RevokeDevices, ManageNodes, ManageUsers, ManageTokens, SetPolicy, ReadAudit}

// AccountWide reports whether the action is about the account rather than
// one of its clusters.
func AccountWide(a Action) bool {
	switch a {
	case ManageUsers, ManageTokens, SetPolicy, ReadAudit:
		return true
	}
	return false
}

// Known is what a document's names are checked against: the account's
// clusters and the groups that exist outside the document (from the
// identity provider or `runos groups create`).
type Known struct {
	Clusters []string
	Groups   []string
}
