//go:build !windows

package lab

import (
	"crypto/rand"
	"encoding/base64"
	"io"

	"github.com/runos/vpn/api"
)

// Secrets are the credentials of one lab, random per lab.
type Secrets struct {
	Password         string
	OperatorToken    string
	EnrollmentTokens map[string]string // node host (ky3-n1) → token
	DBPassword       string            // the database's (postgres)
	IdPClientSecret  string            // control's at the identity provider
	IdPPasswords     map[string]string // the provider's users' (email → password)
}

// NewSecrets draws a lab's secrets from r (crypto/rand.Reader in a real
// lab): 32 random bytes each, base64url without padding, the shape of
// control's tokens (docs/internals.md "Tokens").
func NewSecrets(t *Topology, r io.Reader) (*Secrets, error) {
	tok := func() (string, error) {
		b := make([]byte, 32)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return base64.RawURLEncoding.EncodeToString(b), nil
	}
	s := &Secrets{EnrollmentTokens: map[string]string{}}
	var err error
	if s.Password, err = tok(); err != nil {
		return nil, err
	}
	if s.OperatorToken, err = tok(); err != nil {
		return nil, err
	}
	if t.Store == StorePostgres {
		if s.DBPassword, err = tok(); err != nil {
			return nil, err
		}
	}
	for _, h := range t.Hosts {
		if h.Kind == KindNode {
			if s.EnrollmentTokens[h.Name], err = tok(); err != nil {
				return nil, err
			}
		}
	}
	if !t.IdPIP.IsValid() {
		return s, nil
	}
	if s.IdPClientSecret, err = tok(); err != nil {
		return nil, err
	}
	s.IdPPasswords = map[string]string{}
	for _, u := range t.IdPUsers {
		if s.IdPPasswords[u.Email], err = tok(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// RandomSecrets is NewSecrets from crypto/rand.
func RandomSecrets(t *Topology) (*Secrets, error) { return NewSecrets(t, rand.Reader) }

// World is the world file control is seeded with (api World).
func (t *Topology) World(s *Secrets) api.World {
	w := api.World{
		Accounts: []api.WorldAccount{{AID: t.AID, Name: "RunOS lab", OperatorToken: s.OperatorToken}},
		Users: []api.WorldUser{{Email: t.User, Password: s.Password, Accounts: []string{t.AID},
			Operator: true}},
	}
	for _, c := range t.Clusters {
		wc := api.WorldCluster{
			CID: c.CID, AID: t.AID, Name: c.Name, DomainRoot: t.DomainRoot,
			IsConfigured: c.IsConfigured, UserVPN: api.UserVPNWireGuard,
			VPNService: &api.WorldVPNService{ID: c.VPNID, Name: c.VPNName, NodeID: c.VPNNode,
				Port: api.DefaultVPNPort},
		}
		for _, n := range c.Nodes {
			wn := api.WorldNode{
				NID: n.NID, Name: n.Name, Roles: n.Roles, PublicIP: n.PublicIP.String(),
				Published: n.Published, EnrollmentToken: s.EnrollmentTokens[NodeHost(c.CID, n.NID)],
			}
			if n.IngressIP.IsValid() {
				wn.IngressIP = n.IngressIP.String()
			}
			wc.Nodes = append(wc.Nodes, wn)
		}
		w.Clusters = append(w.Clusters, wc)
	}
	return w
}
