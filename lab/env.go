//go:build !windows

package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvFile is the name of the lab's description inside its directory.
const EnvFile = "env.json"

// Env is D/env.json: everything a script, a test or a person needs to use a
// running lab. e2e/ reads it with LoadEnv.
type Env struct {
	Dir           string       `json:"dir"`
	APIURL        string       `json:"apiUrl"`
	CAFile        string       `json:"caFile"`
	User          string       `json:"user"`
	Password      string       `json:"password"`
	OperatorToken string       `json:"operatorToken"`
	DefaultCID    string       `json:"defaultCid"`
	SessionTTL    string       `json:"sessionTtl"`
	Clusters      []EnvCluster `json:"clusters"`
	Client        EnvClient    `json:"client"`  // the first laptop
	Clients       []EnvClient  `json:"clients"` // every laptop, the first included
	Hosts         []EnvHost    `json:"hosts"`
	Resolver      EnvResolver  `json:"resolver"`
	BinDir        string       `json:"binDir"`
	// PrometheusURL is the lab's Prometheus, reached from inside the lab
	// (up --metrics); "" without it.
	PrometheusURL string `json:"prometheusUrl,omitempty"`
	// Control's store (sqlite, postgres) and replicas; with more than one,
	// APIURL is HAProxy's and each replica has its own address.
	Store           string       `json:"store"`
	ControlReplicas int          `json:"controlReplicas"`
	Replicas        []EnvReplica `json:"replicas,omitempty"`
	Database        *EnvDatabase `json:"database,omitempty"`
	// Users are the lab's users, User (the world file's operator, who
	// signs in with a password) first, then the identity provider's.
	Users []EnvUser `json:"users"`
	// OIDC is the lab's OpenID Connect provider, which control signs
	// users in through; nil in a lab without one.
	OIDC *EnvOIDC `json:"oidc,omitempty"`
}

// How a lab user signs in.
const (
	SignInPassword = "password" // control's own login form (the world file)
	SignInOIDC     = "oidc"     // through the identity provider
)

// EnvUser is a user of the lab and how they sign in. Groups are the
// provider's groups claim; control knows a group once created (runos
// groups create), and the account's policy says what it may reach.
type EnvUser struct {
	Email    string   `json:"email"`
	Password string   `json:"password"`
	Groups   []string `json:"groups"`
	SignIn   string   `json:"signIn"`
}

// EnvOIDC is the lab's identity provider (host idp).
type EnvOIDC struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"clientId"`
	Host     string `json:"host"`
	CertFile string `json:"certFile"` // its certificate (the lab CA's)
	// AdminSocket removes, disables or enables a user at the provider
	// (lab.IdPAdmin; POST /users/{remove,disable,enable} email=…).
	AdminSocket string `json:"adminSocket"`
}

// LabUser returns the lab user with that email.
func (e *Env) LabUser(email string) (*EnvUser, bool) {
	for i := range e.Users {
		if strings.EqualFold(e.Users[i].Email, email) {
			return &e.Users[i], true
		}
	}
	return nil, false
}

// EnvReplica is one runos-control replica behind the balancer.
type EnvReplica struct {
	Host string `json:"host"` // control-1…: runos-lab exec control-1 -- …
	URL  string `json:"url"`  // its own address (the balancer's health check uses /readyz there)
}

// EnvDatabase is the PostgreSQL server on host db.
type EnvDatabase struct {
	Host string `json:"host"`
	URL  string `json:"url"` // postgres://postgres:<password>@198.51.100.5:5432/postgres
}

// EnvCluster is one cluster of the world.
type EnvCluster struct {
	CID        string        `json:"cid"`
	AID        string        `json:"aid"`
	Name       string        `json:"name"`
	Domain     string        `json:"domain"` // <cid>.<aid>.<root>
	VPNService EnvVPNService `json:"vpnService"`
	Nodes      []EnvNode     `json:"nodes"`
	// The cluster's inside (lab/inside.go): the same prefixes in every
	// cluster. Kubeconfig is a file kubectl uses as it is (its server is
	// APIName, which resolves on the VPN).
	Kubeconfig       string       `json:"kubeconfig"`
	APIName          string       `json:"apiName"`
	InternalPrefixes []string     `json:"internalPrefixes"`
	ClusterDNS       string       `json:"clusterDns"`
	APIVIP           string       `json:"apiVip"`
	OutputOnlyDNAT   bool         `json:"outputOnlyDnat"` // ClusterIPs translated for the nodes' own connections only
	Services         []EnvService `json:"services"`
	// Mesh is the internal network between the nodes (lab/insidemesh.go).
	Mesh *EnvMesh `json:"mesh,omitempty"`
}

// EnvService is a Kubernetes Service inside a cluster: GET / on
// DNSName:Port (the per-cluster name a laptop uses) answers Body.
type EnvService struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	ClusterIP string `json:"clusterIp"`
	Port      int    `json:"port"`
	DNSName   string `json:"dnsName"` // <name>.<namespace>.svc.<cid>.<aid>.<root>
	Node      string `json:"node"`    // where its pod lives
	PodIP     string `json:"podIp"`
	Body      string `json:"body"` // cluster=<cid> node=<nid>
}

// EnvVPNService is the cluster's WireGuard server as seeded.
type EnvVPNService struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	NodeID string `json:"nodeId"`
	Port   int    `json:"port"`
}

// EnvNode is a node of a cluster and the lab host that plays it.
type EnvNode struct {
	NID       string   `json:"nid"`
	Host      string   `json:"host"` // e.g. ky3-n1, for `runos-lab exec`
	Netns     string   `json:"netns"`
	IngressIP string   `json:"ingressIp"` // declared, else detected public: what devices dial
	PublicIP  string   `json:"publicIp"`
	Published bool     `json:"published"`
	Roles     []string `json:"roles"`
	// InternalIP is the node's address on the cluster's internal network.
	InternalIP string `json:"internalIp"`
}

// EnvClient is a laptop: its namespace and its daemon's socket (a path that
// works from outside the lab as well as inside it).
type EnvClient struct {
	Host   string `json:"host"`
	Netns  string `json:"netns"`
	Socket string `json:"socket"`
	Config string `json:"config"` // RUNOS_CONFIG
	Home   string `json:"home"`
}

// EnvHost is one host of the lab, its addresses and its processes.
type EnvHost struct {
	Name      string            `json:"name"`
	Netns     string            `json:"netns"`
	MountNS   string            `json:"mountNs"`   // persisted mount namespace file
	Addresses map[string]string `json:"addresses"` // segment (wan, lan) → address
	Processes []EnvProcess      `json:"processes"`
}

// EnvProcess is a process the lab started.
type EnvProcess struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	Log  string `json:"log"`
}

// EnvResolver is the LAN resolver (dnsmasq on the lan host).
type EnvResolver struct {
	Address string            `json:"address"`
	Records map[string]string `json:"records"` // name (a leading *. for a wildcard) → address
}

// Host returns the host with that name.
func (e *Env) Host(name string) (*EnvHost, bool) {
	for i := range e.Hosts {
		if e.Hosts[i].Name == name {
			return &e.Hosts[i], true
		}
	}
	return nil, false
}

// Cluster returns the cluster with that cid.
func (e *Env) Cluster(cid string) (*EnvCluster, bool) {
	for i := range e.Clusters {
		if e.Clusters[i].CID == cid {
			return &e.Clusters[i], true
		}
	}
	return nil, false
}

// Laptop returns the laptop with that host name.
func (e *Env) Laptop(host string) (*EnvClient, bool) {
	for i := range e.Clients {
		if e.Clients[i].Host == host {
			return &e.Clients[i], true
		}
	}
	return nil, false
}

// LoadEnv reads D/env.json.
func LoadEnv(dir string) (*Env, error) {
	b, err := os.ReadFile(filepath.Join(dir, EnvFile))
	if err != nil {
		return nil, fmt.Errorf("no lab in %s (is it up? run: runos-lab up --dir %s): %w", dir, dir, err)
	}
	return ParseEnv(b)
}

// ParseEnv decodes an env.json document.
func ParseEnv(b []byte) (*Env, error) {
	var e Env
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("env.json: %w", err)
	}
	if e.APIURL == "" || len(e.Hosts) == 0 {
		return nil, fmt.Errorf("env.json: incomplete (no apiUrl or hosts)")
	}
	return &e, nil
}
