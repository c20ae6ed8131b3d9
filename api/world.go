package api

import "time"

// World is the world file (runos-control --seed FILE, JSON): the accounts,
// clusters, nodes, users and tokens control starts with. Seeding is
// idempotent: an entity that already exists (same key) is left as it is in
// the store, so restarting control with the same file changes nothing.
type World struct {
	Accounts []WorldAccount `json:"accounts"`
	Users    []WorldUser    `json:"users"`
	Clusters []WorldCluster `json:"clusters"`
}

// WorldAccount is an account (aid) and its operator API token.
type WorldAccount struct {
	AID           string `json:"aid"`
	Name          string `json:"name,omitempty"`
	OperatorToken string `json:"operatorToken,omitempty"` // stored hashed, as the account's API token "world-file"
	// OperatorTokenExpiresAt is when the world file's token stops working;
	// zero: it works until it is revoked (runos tokens revoke world-file).
	OperatorTokenExpiresAt time.Time `json:"operatorTokenExpiresAt,omitzero"`
}

// WorldUser is a user who signs in with email and password.
// Exactly one of Password (hashed by control on import) and PasswordHash
// (bcrypt, "$2a$..." / "$2b$...") is given.
type WorldUser struct {
	Email        string   `json:"email"`
	Password     string   `json:"password,omitempty"`
	PasswordHash string   `json:"passwordHash,omitempty"`
	Accounts     []string `json:"accounts"` // aids the user belongs to
	// Operator makes the user an operator of every account in Accounts;
	// OperatorOf of only those it names (a subset of Accounts). Operator
	// is a role in an account: an operator of one account is a plain user
	// of the others.
	Operator   bool     `json:"operator,omitempty"`
	OperatorOf []string `json:"operatorOf,omitempty"`
}

// WorldCluster is a cluster with its nodes and VPN service.
type WorldCluster struct {
	CID           string      `json:"cid"`
	AID           string      `json:"aid"`
	Name          string      `json:"name"`
	DomainRoot    string      `json:"domainRoot"` // domain is <cid>.<aid>.<domainRoot>
	IsConfigured  bool        `json:"isConfigured"`
	UserVPN       string      `json:"userVpn,omitempty"` // "wireguard" (default when VPNService is set), "netbird" or ""
	CustomDomains []string    `json:"customDomains,omitempty"`
	Nodes         []WorldNode `json:"nodes"`
	// VPNService, when set, is the cluster's WireGuard server as installed.
	VPNService *WorldVPNService `json:"vpnService,omitempty"`
}

// WorldNode is a node of a cluster.
type WorldNode struct {
	NID             string   `json:"nid"`
	Name            string   `json:"name"`
	Roles           []string `json:"roles"`               // control-plane, worker
	IngressIP       string   `json:"ingressIp,omitempty"` // declared ingress address
	PublicIP        string   `json:"publicIp,omitempty"`  // detected public address
	Published       bool     `json:"published"`           // in the public DNS records
	EnrollmentToken string   `json:"enrollmentToken"`     // the gateway's credential; stored hashed
}

// WorldVPNService is a cluster's WireGuard server.
type WorldVPNService struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	NodeID string `json:"nodeId"`
	Port   int    `json:"port,omitempty"` // 0 means DefaultVPNPort
	// RelayURL overrides the relay URL devices are given (VPNService.RelayURL).
	RelayURL string `json:"relayUrl,omitempty"`
}
