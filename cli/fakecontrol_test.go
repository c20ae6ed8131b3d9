package cli

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/api"
)

// fakeControl is an httptest TLS server serving the real api types for the
// operator verbs, with a CA file clients must trust. It records every
// request so tests can assert that nothing was sent for bad input.
type fakeControl struct {
	t      *testing.T
	srv    *httptest.Server
	caFile string

	mu       sync.Mutex
	requests []string
	tokens   map[string]*api.Me // valid bearer tokens
	expired  map[string]bool    // tokens whose session lapsed
	clusters []api.ClusterDetail
	services map[string]*api.VPNService // by id
	moves    map[string]*api.Move

	// Scripted behaviour.
	refuse      map[string]*api.Error // "METHOD path" → refusal
	drop        map[string]bool       // "METHOD path" → taken, then the connection drops
	servicePlan []func(s *api.VPNService)
	movePlan    []func(m *api.Move)
	plan        api.MovePlan
	onPlan      func() // called as the move plan is asked for
	challenge   string // PKCE challenge of the pending authorization code
}

func newFakeControl(t *testing.T) *fakeControl {
	t.Helper()
	c := &fakeControl{
		t:        t,
		tokens:   map[string]*api.Me{},
		expired:  map[string]bool{},
		services: map[string]*api.VPNService{},
		moves:    map[string]*api.Move{},
		refuse:   map[string]*api.Error{},
		drop:     map[string]bool{},
	}
	c.clusters = []api.ClusterDetail{
		{
			Cluster: api.Cluster{CID: "ky3", AID: "rjwrn", Name: "tc3-ky3", Domain: "ky3.rjwrn.example.com", IsConfigured: true, UserVPN: api.UserVPNWireGuard},
			DNSRecords: []api.DNSRecord{
				{Name: "k8s.ky3.rjwrn.example.com", Type: "A", Values: []string{"198.51.100.21"}},
				{Name: "*.ky3.rjwrn.example.com", Type: "A", Values: []string{"198.51.100.21"}},
			},
			Nodes: []api.Node{
				{NID: "n1", CID: "ky3", Name: "ky3-n1", Roles: []string{api.RoleControlPlane, api.RoleWorker}, Status: api.NodeReady,
					IngressIP: "10.77.0.21", DeclaredIngressIP: "10.77.0.21", PublicIP: "198.51.100.21", Published: true, HostsVPN: true},
				{NID: "n2", CID: "ky3", Name: "ky3-n2", Roles: []string{api.RoleWorker}, Status: api.NodeReady,
					IngressIP: "198.51.100.22", PublicIP: "198.51.100.22", Published: true},
			},
		},
		{Cluster: api.Cluster{CID: "xym", AID: "rjwrn", Name: "tc2-xym", Domain: "xym.rjwrn.example.com", IsConfigured: false, UserVPN: api.UserVPNWireGuard}},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", c.serve)
	c.srv = httptest.NewTLSServer(mux)
	t.Cleanup(c.srv.Close)
	c.caFile = filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.srv.Certificate().Raw})
	if err := os.WriteFile(c.caFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *fakeControl) URL() string { return c.srv.URL }

// Requests returns "METHOD /path" of every request so far.
func (c *fakeControl) Requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.requests)
}

func (c *fakeControl) addToken(tok, user string, operator bool) {
	c.mu.Lock()
	c.tokens[tok] = &api.Me{User: user, Accounts: []string{"rjwrn"}, Operator: operator, ExpiresAt: time.Now().Add(24 * time.Hour)}
	c.mu.Unlock()
}

func (c *fakeControl) cluster(cid string) *api.ClusterDetail {
	for i := range c.clusters {
		if c.clusters[i].CID == cid {
			return &c.clusters[i]
		}
	}
	return nil
}

func (c *fakeControl) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	c.mu.Lock()
	c.requests = append(c.requests, key)
	if strings.HasPrefix(r.URL.Path, "/oauth/") {
		c.mu.Unlock()
		c.serveOAuth(w, r)
		return
	}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	me, expired := c.tokens[tok], c.expired[tok]
	refusal := c.refuse[key]
	drop := c.drop[key]
	c.mu.Unlock()
	if drop {
		panic(http.ErrAbortHandler) // control goes away in the middle of the request
	}
	switch {
	case expired:
		writeErr(w, &api.Error{Status: 401, Code: api.CodeSessionExpired, Message: "the session expired"})
		return
	case me == nil:
		writeErr(w, &api.Error{Status: 401, Code: api.CodeUnauthorized, Message: "unknown token"})
		return
	case refusal != nil:
		writeErr(w, refusal)
		return
	}
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case key == "GET /v1/me":
		writeJSON(w, 200, me)
	case key == "DELETE /v1/sessions/current":
		c.expired[tok] = true
		w.WriteHeader(204)
	case key == "GET /v1/clusters":
		var out []api.Cluster
		for _, d := range c.clusters {
			out = append(out, d.Cluster)
		}
		writeJSON(w, 200, out)
	case len(p) >= 3 && p[1] == "clusters":
		cl := c.cluster(p[2])
		if cl == nil {
			writeErr(w, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "no cluster " + p[2], Hint: "see runos clusters list"})
			return
		}
		c.serveCluster(w, r, cl, p[3:])
	case len(p) == 3 && p[1] == "moves" && r.Method == "GET":
		m := c.moves[p[2]]
		if m == nil {
			writeErr(w, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "no move"})
			return
		}
		// Each long-poll advances one scripted step, standing in for the
		// gateways' reports that move it along.
		if since := r.URL.Query().Get(api.ParamSince); since != "" && since != "0" && len(c.movePlan) > 0 {
			c.movePlan[0](m)
			c.movePlan = c.movePlan[1:]
			m.Version++
		}
		writeJSON(w, 200, m)
	default:
		writeErr(w, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "no route " + key})
	}
}

func (c *fakeControl) serveCluster(w http.ResponseWriter, r *http.Request, cl *api.ClusterDetail, rest []string) {
	switch {
	case len(rest) == 0 && r.Method == "GET":
		writeJSON(w, 200, cl)
	case len(rest) == 1 && rest[0] == "nodes":
		writeJSON(w, 200, cl.Nodes)
	case len(rest) >= 2 && rest[0] == "nodes":
		var n *api.Node
		for i := range cl.Nodes {
			if cl.Nodes[i].NID == rest[1] {
				n = &cl.Nodes[i]
			}
		}
		if n == nil {
			writeErr(w, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "no node " + rest[1] + " in " + cl.CID})
			return
		}
		switch {
		case len(rest) == 2 && r.Method == "GET":
			writeJSON(w, 200, n)
		case len(rest) == 2 && r.Method == "DELETE":
			if n.HostsVPN {
				writeErr(w, &api.Error{Status: 409, Code: api.CodeRefused,
					Message: "node " + n.NID + " hosts the VPN server and refuses deletion",
					Hint:    "move the server off it first: runos services wireguard move <id> --cid " + cl.CID + " --target-node-id <nid>"})
				return
			}
			w.WriteHeader(204)
		case len(rest) == 3 && rest[2] == "ingress" && r.Method == "PUT":
			var req api.NodeIngressRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				writeErr(w, &api.Error{Status: 400, Code: api.CodeInvalid, Message: "bad body"})
				return
			}
			if req.IngressIP != "" {
				n.DeclaredIngressIP, n.IngressIP = req.IngressIP, req.IngressIP
			}
			if req.Published != nil {
				n.Published = *req.Published
			}
			writeJSON(w, 200, n)
		case len(rest) == 3 && rest[2] == "delete-preflight":
			writeJSON(w, 200, api.DeletePreflight{Warnings: []string{"removing n2 leaves etcd on an even voting-member count (2)"}})
		default:
			writeErr(w, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "no route"})
		}
	case len(rest) >= 2 && rest[0] == "services" && rest[1] == "wireguard":
		c.serveServices(w, r, cl, rest[2:])
	default:
		writeErr(w, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "no route"})
	}
}

func (c *fakeControl) serveServices(w http.ResponseWriter, r *http.Request, cl *api.ClusterDetail, rest []string) {
	switch {
	case len(rest) == 0 && r.Method == "GET":
		out := []api.VPNService{}
		for _, s := range c.services {
			if s.CID == cl.CID {
				out = append(out, *s)
			}
		}
		writeJSON(w, 200, out)
	case len(rest) == 0 && r.Method == "POST":
		var req api.AddVPNServiceRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeErr(w, &api.Error{Status: 400, Code: api.CodeInvalid, Message: "bad body"})
			return
		}
		s := &api.VPNService{ID: "wg-" + cl.CID, CID: cl.CID, Name: req.Name, NodeID: req.TargetNodeID, Port: req.Port,
			State: api.ServiceInstalling, Subnet: "100.100.1.0/24", Address: "100.100.1.1", Version: 1}
		c.services[s.ID] = s
		writeJSON(w, 201, s)
	case len(rest) >= 1:
		s := c.services[rest[0]]
		if s == nil || s.CID != cl.CID {
			writeErr(w, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "no service " + rest[0] + " in " + cl.CID})
			return
		}
		switch {
		case len(rest) == 1 && r.Method == "GET":
			if since := r.URL.Query().Get(api.ParamSince); since != "" && since != "0" && len(c.servicePlan) > 0 {
				c.servicePlan[0](s)
				c.servicePlan = c.servicePlan[1:]
				s.Version++
			}
			writeJSON(w, 200, s)
		case len(rest) == 2 && rest[1] == "move-plan":
			if c.onPlan != nil {
				c.onPlan()
			}
			writeJSON(w, 200, c.plan)
		case len(rest) == 2 && rest[1] == "moves":
			var req api.MoveRequest
			json.NewDecoder(r.Body).Decode(&req)
			m := &api.Move{ID: "mv1", CID: cl.CID, ServiceID: s.ID, FromNodeID: s.NodeID, TargetNodeID: req.TargetNodeID,
				State: api.MovePreparing, Endpoint: c.plan.Endpoint, AddressKind: c.plan.AddressKind, Warnings: []string{},
				StartedAt: time.Unix(1000, 0).UTC(), Version: 1,
				Steps: []api.MoveStep{{At: time.Unix(1000, 0).UTC(), Text: "asked " + req.TargetNodeID + " to bring the server up"}}}
			c.moves[m.ID] = m
			writeJSON(w, 201, m)
		default:
			writeErr(w, &api.Error{Status: 404, Code: api.CodeNotFound, Message: "no route"})
		}
	}
}

// serveOAuth is a minimal authorization server for the real auth.Flow:
// /oauth/authorize approves at once (as if the user signed in) and
// redirects to the loopback URI with a code bound to the PKCE challenge;
// the device grant is approved at its first poll.
func (c *fakeControl) serveOAuth(w http.ResponseWriter, r *http.Request) {
	oauthErr := func(code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		json.NewEncoder(w).Encode(map[string]string{"error": code})
	}
	issue := func() {
		c.mu.Lock()
		tok := "oauth" + strconv.Itoa(len(c.tokens))
		c.mu.Unlock()
		c.addToken(tok, "alice@example.com", true)
		writeJSON(w, 200, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 86400})
	}
	switch r.URL.Path {
	case api.PathAuthorize:
		q := r.URL.Query()
		ru, err := url.Parse(q.Get("redirect_uri"))
		if err != nil || ru.Hostname() != "127.0.0.1" || q.Get("code_challenge_method") != "S256" || q.Get("client_id") != api.ClientCLI {
			http.Error(w, "bad authorize request", 400)
			return
		}
		c.mu.Lock()
		c.challenge = q.Get("code_challenge")
		c.mu.Unlock()
		v := url.Values{"code": {"code1"}, "state": {q.Get("state")}}
		http.Redirect(w, r, ru.String()+"?"+v.Encode(), http.StatusFound)
	case api.PathDeviceCode:
		writeJSON(w, 200, map[string]any{"device_code": "dev1", "user_code": "WDJB-MJHT",
			"verification_uri": c.srv.URL + api.PathDeviceVerify, "expires_in": 60, "interval": 1})
	case api.PathToken:
		r.ParseForm()
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			c.mu.Lock()
			ok := r.PostForm.Get("code") == "code1" && base64.RawURLEncoding.EncodeToString(sum[:]) == c.challenge
			c.mu.Unlock()
			if !ok {
				oauthErr("invalid_grant")
				return
			}
			issue()
		case "urn:ietf:params:oauth:grant-type:device_code":
			if r.PostForm.Get("device_code") != "dev1" {
				oauthErr("invalid_grant")
				return
			}
			issue()
		default:
			oauthErr("unsupported_grant_type")
		}
	default:
		http.NotFound(w, r)
	}
}
