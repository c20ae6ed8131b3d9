// Package seed reads, checks and imports the world file (api.World JSON,
// runos-control --seed). Parsing is strict (unknown fields are errors, so a
// typo does not silently drop a node); validation reports every problem at
// once, each with where it is; import is idempotent: what already exists in
// the store (same key) is left as it is.
package seed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/model"
)

// MaxSize is the largest world file accepted.
const MaxSize = 16 << 20

// MinTokenLen is the shortest operator or enrollment token accepted: a
// guessable credential in a world file is a mistake worth stopping on.
const MinTokenLen = 16

// Parse decodes a world file strictly and validates it.
func Parse(data []byte) (api.World, error) {
	var w api.World
	if len(data) > MaxSize {
		return w, fmt.Errorf("world file: larger than %d bytes", MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return api.World{}, fmt.Errorf("world file: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return api.World{}, errors.New("world file: trailing data after the JSON object")
	}
	if err := Validate(w); err != nil {
		return api.World{}, err
	}
	return w, nil
}

// Validate reports every problem in w (nil if none).
func Validate(w api.World) error {
	v := &validator{aids: map[string]bool{}, tokens: map[string]string{}, emails: map[string]bool{}, cids: map[string]bool{}, serviceIDs: map[string]bool{}}
	for i, a := range w.Accounts {
		v.account(fmt.Sprintf("accounts[%d] (%s)", i, a.AID), a)
	}
	for i, u := range w.Users {
		v.user(fmt.Sprintf("users[%d] (%s)", i, u.Email), u)
	}
	for i, c := range w.Clusters {
		v.cluster(fmt.Sprintf("clusters[%d] (%s)", i, c.CID), c)
	}
	return v.err()
}

// validator collects a world file's problems, and what it has seen so far
// of what must be unique across the file (or be declared before its use:
// accounts before the users and clusters in them).
type validator struct {
	errs       []error
	aids       map[string]bool
	tokens     map[string]string // token → where it was first
	emails     map[string]bool   // lowercase
	cids       map[string]bool
	serviceIDs map[string]bool
}

func (v *validator) account(where string, a api.WorldAccount) {
	if !isLabel(a.AID) {
		v.add("%s: invalid aid %q: an aid is 1 to 63 lowercase letters, digits and inner hyphens", where, a.AID)
	}
	v.unique(v.aids, a.AID, "%s: duplicate aid %q", where, a.AID)
	if a.OperatorToken != "" {
		v.token(where+": operatorToken", a.OperatorToken)
	}
}

// token checks an operator or enrollment token: long enough, and unique.
func (v *validator) token(where, tok string) {
	if len(tok) < MinTokenLen {
		v.add("%s: token too short (at least %d characters)", where, MinTokenLen)
		return
	}
	if prev, ok := v.tokens[tok]; ok {
		v.add("%s: same token as %s (every token must be unique)", where, prev)
		return
	}
	v.tokens[tok] = where
}

func (v *validator) user(where string, u api.WorldUser) {
	if at := strings.Index(u.Email, "@"); at <= 0 || at == len(u.Email)-1 || strings.ContainsAny(u.Email, " \t\r\n") {
		v.add("%s: invalid email %q", where, u.Email)
	}
	v.unique(v.emails, strings.ToLower(u.Email), "%s: duplicate email %q", where, u.Email)
	v.password(where, u)
	if len(u.Accounts) == 0 {
		v.add("%s: belongs to no account", where)
	}
	for _, aid := range u.Accounts {
		if !v.aids[aid] {
			v.add("%s: unknown account %q", where, aid)
		}
	}
	if u.Operator && len(u.OperatorOf) > 0 {
		v.add("%s: operator and operatorOf both given: operator makes the user operator of every account listed, operatorOf of some", where)
	}
	for _, aid := range u.OperatorOf {
		if !slices.Contains(u.Accounts, aid) {
			v.add("%s: operatorOf %q: not among the user's accounts", where, aid)
		}
	}
}

// password checks that a user has one password or bcrypt hash, and that
// bcrypt can take it.
func (v *validator) password(where string, u api.WorldUser) {
	switch {
	case (u.Password == "") == (u.PasswordHash == ""):
		v.add("%s: give exactly one of password and passwordHash", where)
	case u.PasswordHash != "":
		if _, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil || !strings.HasPrefix(u.PasswordHash, "$2") {
			v.add("%s: passwordHash is not a bcrypt hash ($2a$/$2b$…)", where)
		}
	case len(u.Password) > 72:
		v.add("%s: password longer than 72 bytes (bcrypt's limit)", where)
	}
}

func (v *validator) cluster(where string, c api.WorldCluster) {
	if err := api.CheckCID(c.CID); err != nil {
		v.add("%s: %v", where, err)
	}
	v.unique(v.cids, c.CID, "%s: duplicate cid %q", where, c.CID)
	if !v.aids[c.AID] {
		v.add("%s: unknown account %q", where, c.AID)
	}
	if !isDomain(c.DomainRoot) {
		v.add("%s: invalid domainRoot %q", where, c.DomainRoot)
	}
	v.userVPN(where, c)
	v.customDomains(where, c.CustomDomains)
	nids := map[string]bool{}
	for j, n := range c.Nodes {
		v.node(fmt.Sprintf("%s: nodes[%d] (%s)", where, j, n.NID), n, nids)
	}
	if s := c.VPNService; s != nil {
		v.vpnService(where+": vpnService", *s, nids)
	}
}

// userVPN checks the cluster's choice of user VPN against its service.
func (v *validator) userVPN(where string, c api.WorldCluster) {
	switch c.UserVPN {
	case api.UserVPNNone, api.UserVPNWireGuard:
	case api.UserVPNNetBird:
		if c.VPNService != nil {
			v.add("%s: userVpn is netbird and a WireGuard vpnService is set: WireGuard and NetBird are mutually exclusive", where)
		}
	default:
		v.add("%s: userVpn %q: want \"wireguard\", \"netbird\" or nothing", where, c.UserVPN)
	}
}

func (v *validator) customDomains(where string, ds []string) {
	seen := map[string]bool{}
	for _, d := range ds {
		n := model.NormalizeDomain(d)
		if !isDomain(n) {
			v.add("%s: invalid custom domain %q", where, d)
		}
		v.unique(seen, n, "%s: duplicate custom domain %q", where, d)
	}
}

// node checks one node of a cluster; nids is the cluster's nodes so far.
func (v *validator) node(where string, n api.WorldNode, nids map[string]bool) {
	if !isLabel(n.NID) {
		v.add("%s: invalid nid %q: a nid is 1 to 63 lowercase letters, digits and inner hyphens", where, n.NID)
	}
	v.unique(nids, n.NID, "%s: duplicate nid %q", where, n.NID)
	v.roles(where, n.Roles)
	v.ip(where+": ingressIp", n.IngressIP)
	v.ip(where+": publicIp", n.PublicIP)
	v.token(where+": enrollmentToken", n.EnrollmentToken)
}

func (v *validator) roles(where string, roles []string) {
	if len(roles) == 0 {
		v.add("%s: no roles (want control-plane, worker or both)", where)
	}
	seen := map[string]bool{}
	for _, r := range roles {
		if r != api.RoleControlPlane && r != api.RoleWorker {
			v.add("%s: unknown role %q (want control-plane or worker)", where, r)
		}
		v.unique(seen, r, "%s: role %q twice", where, r)
	}
}

// vpnService checks a cluster's WireGuard service; nids is the cluster's
// nodes, one of which must serve it.
func (v *validator) vpnService(where string, s api.WorldVPNService, nids map[string]bool) {
	if !isLabel(s.ID) {
		v.add("%s: invalid id %q", where, s.ID)
	}
	v.unique(v.serviceIDs, s.ID, "%s: duplicate service id %q", where, s.ID)
	if !nids[s.NodeID] {
		v.add("%s: VPN service on unknown node %q", where, s.NodeID)
	}
	if s.Port < 0 || s.Port > 65535 {
		v.add("%s: port %d out of range", where, s.Port)
	}
	if err := api.CheckRelayURL(s.RelayURL); err != nil {
		v.add("%s: %v", where, err)
	}
}

// ip checks an optional address a device would dial.
func (v *validator) ip(where, s string) {
	if s == "" {
		return
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		v.add("%s: %q is not an IP address", where, s)
		return
	}
	if !model.Dialable(a) {
		v.add("%s: %s is not an address devices could dial", where, a)
	}
}

// unique marks key seen, saying the problem (format, args) if it already
// was.
func (v *validator) unique(seen map[string]bool, key string, format string, args ...any) {
	if seen[key] {
		v.add(format, args...)
	}
	seen[key] = true
}

func (v *validator) add(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

func (v *validator) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return fmt.Errorf("world file: %d problem(s):\n  %w", len(v.errs), joinLines(v.errs))
}

type lines []error

func (l lines) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n  ")
}

func (l lines) Unwrap() []error { return l }

func joinLines(errs []error) error { return lines(errs) }

// isLabel: a DNS label in lowercase.
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// isDomain: two or more lowercase labels.
func isDomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if !isLabel(p) {
			return false
		}
	}
	return true
}
