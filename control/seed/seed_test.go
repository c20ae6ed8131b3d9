package seed

import (
	"context"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/pool"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/store/sqlstore"
	"github.com/runos/vpn/control/token"
)

const labWorld = `{
  "accounts": [{"aid": "rjwrn", "name": "RJ", "operatorToken": "op-token-0123456789abcdef"}],
  "users": [{"email": "ada@example.com", "password": "correct horse", "accounts": ["rjwrn"], "operator": true}],
  "clusters": [
    {"cid": "ky3", "aid": "rjwrn", "name": "tc3-ky3", "domainRoot": "example.com", "isConfigured": true,
     "nodes": [
       {"nid": "n1", "roles": ["control-plane", "worker"], "ingressIp": "10.77.0.21", "publicIp": "198.51.100.21", "published": true, "enrollmentToken": "enroll-ky3-n1-0123456789"},
       {"nid": "n2", "roles": ["worker"], "publicIp": "198.51.100.22", "enrollmentToken": "enroll-ky3-n2-0123456789"}],
     "vpnService": {"id": "wg-ky3", "name": "vpn", "nodeId": "n1"}},
    {"cid": "xym", "aid": "rjwrn", "name": "tc2-xym", "domainRoot": "example.com", "customDomains": ["Apps.Example.ORG"],
     "nodes": [{"nid": "n1", "roles": ["control-plane", "worker"], "publicIp": "198.51.100.31", "published": true, "enrollmentToken": "enroll-xym-n1-0123456789"}],
     "vpnService": {"id": "wg-xym", "nodeId": "n1", "port": 51820}},
    {"cid": "nb1", "aid": "rjwrn", "name": "netbird", "domainRoot": "example.com", "userVpn": "netbird",
     "nodes": [{"nid": "n1", "roles": ["control-plane"], "publicIp": "198.51.100.41", "enrollmentToken": "enroll-nb1-n1-0123456789"}]}
  ]
}`

func TestParseLabWorld(t *testing.T) {
	w, err := Parse([]byte(labWorld))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Clusters) != 3 || w.Clusters[0].VPNService.NodeID != "n1" {
		t.Fatalf("world = %+v", w)
	}
}

func mutate(t *testing.T, f func(w *api.World)) []byte {
	t.Helper()
	var w api.World
	if err := json.Unmarshal([]byte(labWorld), &w); err != nil {
		t.Fatal(err)
	}
	f(&w)
	b, _ := json.Marshal(w)
	return b
}

func TestParseRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"unknown field", []byte(`{"acounts": []}`), `unknown field "acounts"`},
		{"trailing data", []byte(labWorld + `{}`), "trailing data"},
		{"not json", []byte(`{"accounts": [`), "world file"},
		{"bad cid", mutate(t, func(w *api.World) { w.Clusters[0].CID = "KY3" }), `invalid cid "KY3"`},
		{"short cid", mutate(t, func(w *api.World) { w.Clusters[0].CID = "k3" }), "3 to 16 lowercase letters and digits"},
		{"duplicate cid", mutate(t, func(w *api.World) { w.Clusters[1].CID = "ky3" }), `duplicate cid "ky3"`},
		{"node ip", mutate(t, func(w *api.World) { w.Clusters[0].Nodes[0].IngressIP = "10.77.0" }), `nodes[0] (n1): ingressIp: "10.77.0" is not an IP address`},
		{"public ip", mutate(t, func(w *api.World) { w.Clusters[0].Nodes[1].PublicIP = "example.com" }), `publicIp: "example.com" is not an IP address`},
		{"unknown vpn node", mutate(t, func(w *api.World) { w.Clusters[0].VPNService.NodeID = "n9" }), `VPN service on unknown node "n9"`},
		{"duplicate nid", mutate(t, func(w *api.World) { w.Clusters[0].Nodes[1].NID = "n1" }), `duplicate nid "n1"`},
		{"duplicate service id", mutate(t, func(w *api.World) { w.Clusters[1].VPNService.ID = "wg-ky3" }), `duplicate service id "wg-ky3"`},
		{"unknown account", mutate(t, func(w *api.World) { w.Clusters[0].AID = "nope" }), `unknown account "nope"`},
		{"user account", mutate(t, func(w *api.World) { w.Users[0].Accounts = []string{"nope"} }), `unknown account "nope"`},
		{"operatorOf elsewhere", mutate(t, func(w *api.World) { w.Users[0].Operator, w.Users[0].OperatorOf = false, []string{"other"} }),
			`operatorOf "other": not among the user's accounts`},
		{"operator and operatorOf", mutate(t, func(w *api.World) { w.Users[0].OperatorOf = []string{"rjwrn"} }), "operator and operatorOf both given"},
		{"both passwords", mutate(t, func(w *api.World) { w.Users[0].PasswordHash = "$2a$04$abc" }), "exactly one of password and passwordHash"},
		{"bad hash", mutate(t, func(w *api.World) { w.Users[0].Password, w.Users[0].PasswordHash = "", "md5:abc" }), "not a bcrypt hash"},
		{"duplicate email", mutate(t, func(w *api.World) { w.Users = append(w.Users, w.Users[0]) }), "duplicate email"},
		{"role", mutate(t, func(w *api.World) { w.Clusters[0].Nodes[1].Roles = []string{"master"} }), `unknown role "master"`},
		{"no roles", mutate(t, func(w *api.World) { w.Clusters[0].Nodes[1].Roles = nil }), "no roles"},
		{"netbird with wireguard", mutate(t, func(w *api.World) { w.Clusters[2].VPNService = &api.WorldVPNService{ID: "wg-nb", NodeID: "n1"} }), "mutually exclusive"},
		{"user vpn", mutate(t, func(w *api.World) { w.Clusters[0].UserVPN = "openvpn" }), `userVpn "openvpn"`},
		{"short token", mutate(t, func(w *api.World) { w.Clusters[0].Nodes[0].EnrollmentToken = "x" }), "token too short"},
		{"shared token", mutate(t, func(w *api.World) { w.Clusters[0].Nodes[1].EnrollmentToken = w.Clusters[0].Nodes[0].EnrollmentToken }), "same token as"},
		{"domain root", mutate(t, func(w *api.World) { w.Clusters[0].DomainRoot = "localhost" }), `invalid domainRoot "localhost"`},
		{"port", mutate(t, func(w *api.World) { w.Clusters[0].VPNService.Port = 70000 }), "port 70000 out of range"},
		{"duplicate aid", mutate(t, func(w *api.World) { w.Accounts = append(w.Accounts, api.WorldAccount{AID: "rjwrn"}) }), `duplicate aid "rjwrn"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	_, err := Parse(mutate(t, func(w *api.World) {
		w.Clusters[0].CID = "BAD"
		w.Clusters[1].Nodes[0].IngressIP = "nope"
	}))
	if err == nil || !strings.Contains(err.Error(), "2 problem(s)") {
		t.Fatalf("err = %v", err)
	}
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "control.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestImportIsIdempotent(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	w, err := Parse([]byte(labWorld))
	if err != nil {
		t.Fatal(err)
	}
	services, _ := pool.NewServices(netip.MustParsePrefix("100.100.0.0/16"))
	opt := Options{Services: services, BcryptCost: bcrypt.MinCost, Now: time.Now()}
	sum, err := Import(ctx, st, w, opt)
	if err != nil {
		t.Fatal(err)
	}
	// 12: one account, its world-file token, users, clusters, nodes, services.
	if sum.Created != 12 || sum.Existing != 0 {
		t.Fatalf("first import: %+v", sum)
	}
	var v1 uint64
	_ = st.View(ctx, func(r store.Reader) error {
		v1, _ = r.GlobalVersion()
		u, err := r.User("ada@example.com")
		if err != nil || bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte("correct horse")) != nil || !u.OperatorOf("rjwrn") {
			t.Errorf("user = %+v, %v", u, err)
		}
		a, err := r.APITokenByHash(token.Hash("op-token-0123456789abcdef"))
		if err != nil || a.AID != "rjwrn" || a.Name != WorldTokenName || !a.ExpiresAt.IsZero() {
			t.Errorf("operator token: %+v, %v", a, err)
		}
		ky3, _ := r.Services("ky3")
		xym, _ := r.Services("xym")
		if len(ky3) != 1 || ky3[0].Subnet.String() != "100.100.1.0/24" || ky3[0].Port != api.DefaultVPNPort ||
			len(xym) != 1 || xym[0].Subnet.String() != "100.100.2.0/24" || xym[0].Port != 51820 {
			t.Errorf("services: %+v %+v", ky3, xym)
		}
		c, _ := r.Cluster("ky3")
		if c.UserVPN != api.UserVPNWireGuard {
			t.Errorf("ky3 user VPN = %q", c.UserVPN)
		}
		x, _ := r.Cluster("xym")
		if len(x.CustomDomains) != 1 || x.CustomDomains[0] != "apps.example.org" {
			t.Errorf("custom domains = %q", x.CustomDomains)
		}
		n, err := r.NodeByEnrollmentToken(token.Hash("enroll-ky3-n1-0123456789"))
		if err != nil || n.NID != "n1" || n.DeclaredIngress.String() != "10.77.0.21" {
			t.Errorf("node by token: %+v, %v", n, err)
		}
		if v, _ := r.TopicVersion("gateway:ky3/n2"); v == 0 {
			t.Error("imported node's gateway topic has no version")
		}
		return nil
	})
	// Again, with a changed password and node: nothing changes.
	w.Users[0].Password = "something else"
	w.Clusters[0].Nodes[0].IngressIP = "10.77.0.99"
	sum, err = Import(ctx, st, w, opt)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Created != 0 || sum.Existing != 12 {
		t.Fatalf("second import: %+v", sum)
	}
	_ = st.View(ctx, func(r store.Reader) error {
		if v, _ := r.GlobalVersion(); v != v1 {
			t.Errorf("version moved from %d to %d", v1, v)
		}
		n, _ := r.Node("ky3", "n1")
		if n.DeclaredIngress.String() != "10.77.0.21" {
			t.Errorf("existing node changed: %s", n.DeclaredIngress)
		}
		u, _ := r.User("ada@example.com")
		if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte("correct horse")) != nil {
			t.Error("existing user's password changed")
		}
		return nil
	})
	// A new node in the file is added.
	w.Clusters[0].Nodes = append(w.Clusters[0].Nodes, api.WorldNode{NID: "n3", Roles: []string{"worker"}, EnrollmentToken: "enroll-ky3-n3-0123456789"})
	sum, err = Import(ctx, st, w, opt)
	if err != nil || sum.Created != 1 {
		t.Fatalf("third import: %+v, %v", sum, err)
	}
}

// TestImportOperatorRoles: operator makes a user operator of every account
// the file lists them in; operatorOf of the accounts it names alone.
func TestImportOperatorRoles(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	w := api.World{
		Accounts: []api.WorldAccount{{AID: "acme"}, {AID: "beta"}},
		Users: []api.WorldUser{
			{Email: "all@example.com", Password: "pw", Accounts: []string{"acme", "beta"}, Operator: true},
			{Email: "one@example.com", Password: "pw", Accounts: []string{"acme", "beta"}, OperatorOf: []string{"beta"}},
			{Email: "none@example.com", Password: "pw", Accounts: []string{"acme", "beta"}},
		},
	}
	if _, err := Import(ctx, st, w, Options{BcryptCost: bcrypt.MinCost, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_ = st.View(ctx, func(r store.Reader) error {
		for email, want := range map[string]string{"all@example.com": "acme beta", "one@example.com": "beta", "none@example.com": ""} {
			if u, err := r.User(email); err != nil || strings.Join(u.Operates, " ") != want {
				t.Errorf("%s operates %q, %v; want %q", email, u.Operates, err, want)
			}
		}
		return nil
	})
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(labWorld))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"clusters":[{"cid":"abc","nodes":[{"nid":"n1","ingressIp":"::1"}]}]}`))
	f.Add([]byte(`{"users":[{"email":"@","passwordHash":"$2a$"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parses is valid, and stays valid through a round trip.
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(b); err != nil {
			t.Fatalf("round trip of a valid world fails: %v", err)
		}
	})
}
