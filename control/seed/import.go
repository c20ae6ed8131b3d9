package seed

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/token"
)

// Options are what Import needs besides the world.
type Options struct {
	Services   pool.Services // where new VPN services get their subnet
	BcryptCost int           // for plain passwords; 0 means 12
	Now        time.Time
}

// Summary counts what Import created and what it found already there.
type Summary struct {
	Created, Existing int
}

// Import writes w into st in one transaction, creating what is missing and
// leaving what exists as it is. It touches the topics of what it creates so
// that long-polls see a version.
func Import(ctx context.Context, st store.Store, w api.World, opt Options) (Summary, error) {
	if err := Validate(w); err != nil {
		return Summary{}, err
	}
	cost := opt.BcryptCost
	if cost == 0 {
		cost = 12
	}
	var sum Summary
	// Hash new users' passwords before the transaction: bcrypt is slow on
	// purpose, and the writer should not wait on it.
	hashes := map[string]string{}
	err := st.View(ctx, func(r store.Reader) error {
		for _, u := range w.Users {
			if there, err := exists(r.User(u.Email)); err != nil {
				return fmt.Errorf("user %s: %w", u.Email, err)
			} else if there {
				continue
			}
			if u.PasswordHash != "" {
				hashes[u.Email] = u.PasswordHash
				continue
			}
			h, err := bcrypt.GenerateFromPassword([]byte(u.Password), cost)
			if err != nil {
				return fmt.Errorf("hash password of %s: %w", u.Email, err)
			}
			hashes[u.Email] = string(h)
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	_, err = st.Update(ctx, func(tx store.Writer) error {
		sum = Summary{}
		count := func(err error) (bool, error) {
			switch {
			case err == nil:
				sum.Created++
				return true, nil
			case errors.Is(err, store.ErrExists):
				sum.Existing++
				return false, nil
			default:
				return false, err
			}
		}
		for _, a := range w.Accounts {
			if there, err := exists(tx.Account(a.AID)); err != nil {
				return fmt.Errorf("account %s: %w", a.AID, err)
			} else if there {
				sum.Existing++
			} else if _, err := count(tx.PutAccount(model.Account{AID: a.AID, Name: a.Name})); err != nil {
				return err
			}
			if err := importToken(tx, a, opt.Now, count); err != nil {
				return fmt.Errorf("account %s: %w", a.AID, err)
			}
		}
		for _, u := range w.Users {
			h, ok := hashes[u.Email]
			if !ok {
				sum.Existing++
				continue
			}
			if _, err := count(tx.PutUser(model.User{Email: u.Email, PasswordHash: h, Accounts: u.Accounts, Operates: operates(u)})); err != nil {
				return err
			}
		}
		for _, c := range w.Clusters {
			if err := importCluster(tx, c, opt, count); err != nil {
				return fmt.Errorf("cluster %s: %w", c.CID, err)
			}
		}
		return nil
	})
	return sum, err
}

// operates are the accounts where the world file makes u an operator:
// every account it lists u in when operator is set, else those of
// operatorOf.
func operates(u api.WorldUser) []string {
	if u.Operator {
		return u.Accounts
	}
	return u.OperatorOf
}

// WorldTokenName is the name of the API token the world file gives an
// account (runos tokens list shows it; runos tokens revoke world-file ends it).
const WorldTokenName = "world-file"

// importToken makes the account's world-file operator token an API token,
// unless a token with the same secret exists already (revoked or not: a
// revoked world token stays revoked across restarts with the same file).
func importToken(tx store.Writer, a api.WorldAccount, now time.Time, count func(error) (bool, error)) error {
	if a.OperatorToken == "" {
		return nil
	}
	hash := token.Hash(a.OperatorToken)
	if _, err := tx.APITokenByHash(hash); err == nil {
		_, err := count(store.ErrExists)
		return err
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	// A live token of that name with another secret (the world file's
	// token was changed) is what exists: it is left as it is, like every
	// other entry, until it is revoked.
	_, err := count(tx.PutAPIToken(model.APIToken{ID: token.ID("tok"), AID: a.AID, Name: WorldTokenName, Hash: hash,
		CreatedAt: now, CreatedBy: "world file", ExpiresAt: a.OperatorTokenExpiresAt.UTC()}))
	return err
}

func importCluster(tx store.Writer, c api.WorldCluster, opt Options, count func(error) (bool, error)) error {
	userVPN := c.UserVPN
	if userVPN == "" && c.VPNService != nil {
		userVPN = api.UserVPNWireGuard
	}
	domains := make([]string, len(c.CustomDomains))
	for i, d := range c.CustomDomains {
		domains[i] = model.NormalizeDomain(d)
	}
	if there, err := exists(tx.Cluster(c.CID)); err != nil {
		return err
	} else if there {
		count(store.ErrExists)
	} else if created, err := count(tx.PutCluster(model.Cluster{CID: c.CID, AID: c.AID, Name: c.Name, DomainRoot: c.DomainRoot,
		IsConfigured: c.IsConfigured, UserVPN: userVPN, CustomDomains: domains})); err != nil {
		return err
	} else if created {
		tx.Touch(hub.Cluster(c.CID))
	}
	for _, n := range c.Nodes {
		if there, err := exists(tx.Node(c.CID, n.NID)); err != nil {
			return fmt.Errorf("node %s: %w", n.NID, err)
		} else if there {
			count(store.ErrExists)
			continue
		}
		node := model.Node{CID: c.CID, NID: n.NID, Name: n.Name, Roles: n.Roles, Published: n.Published,
			EnrollmentTokenHash: token.Hash(n.EnrollmentToken)}
		if node.Name == "" {
			node.Name = n.NID
		}
		node.DeclaredIngress = parseOrZero(n.IngressIP)
		node.PublicIP = parseOrZero(n.PublicIP)
		created, err := count(tx.PutNode(node))
		if err != nil {
			return err
		}
		if created {
			tx.Touch(hub.Gateway(c.CID, n.NID), hub.Cluster(c.CID))
		}
	}
	s := c.VPNService
	if s == nil {
		return nil
	}
	if there, err := exists(tx.Service(s.ID)); err != nil {
		return fmt.Errorf("VPN service %s: %w", s.ID, err)
	} else if there {
		count(store.ErrExists)
		return nil
	}
	if existing, err := tx.Services(c.CID); err != nil {
		return err
	} else if len(existing) > 0 {
		// One WireGuard server per cluster: the store's is the one.
		count(store.ErrExists)
		return nil
	}
	lo, hi := opt.Services.Range()
	idx, err := tx.FreeServiceSubnetIndex(lo, hi)
	if err != nil {
		return fmt.Errorf("VPN service %s: service pool %s: %w", s.ID, opt.Services.Prefix(), err)
	}
	port := s.Port
	if port == 0 {
		port = api.DefaultVPNPort
	}
	name := s.Name
	if name == "" {
		name = strings.TrimSpace(s.ID)
	}
	if _, err := count(tx.PutService(model.Service{ID: s.ID, CID: c.CID, Name: name, NodeID: s.NodeID, Port: port,
		State: api.ServiceInstalling, SubnetIndex: idx, Subnet: opt.Services.Subnet(idx), CreatedAt: opt.Now, Seeded: true,
		RelayURL: s.RelayURL})); err != nil {
		return err
	}
	tx.Touch(hub.Service(s.ID), hub.Cluster(c.CID), hub.Gateway(c.CID, s.NodeID))
	return nil
}

// exists reads a lookup's answer: there, not there, or a read that failed
// (which must fail the import: taking it for "already there" would skip
// what the world file asks for and report success).
func exists[T any](_ T, err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	}
	return false, err
}

func parseOrZero(s string) netip.Addr {
	a, _ := netip.ParseAddr(s) // validated
	return a.Unmap()
}
