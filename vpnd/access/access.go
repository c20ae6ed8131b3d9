// Package access decides who may steer the daemon through its local API.
//
// Reading (GET) is open to every local user. Changing state (a session,
// connect, disconnect, down) is for root, the operator recorded at install
// (operator.json in the state directory, written by `runos vpn install`
// through WriteOperator) and members of the runos group. Every request that
// carries a browser's Origin or Referer header, or a Host other than the one
// the local API client sends, is refused: a web page must not be able to
// drive the daemon, not even through a DNS-rebound name.
package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/store"
)

// Host is the only Host header the daemon answers (the localapi client's).
const Host = "local.runos"

// Group is the group whose members may steer the daemon.
const Group = "runos"

// OperatorFile is the operator record inside the state directory.
const OperatorFile = "operator.json"

// Operator is the user recorded at install who may steer the daemon.
type Operator struct {
	UID  int    `json:"uid"` // -1 on Windows, which has SIDs instead
	User string `json:"user"`
	SID  string `json:"sid,omitempty"` // Windows: the user's SID (platform.PeerCred.SID)
}

// WriteOperator records op as the machine's operator in stateDir (0600,
// atomically). `runos vpn install` calls it with the invoking user.
func WriteOperator(stateDir string, op Operator) error {
	if (op.UID < 0 && op.SID == "") || op.User == "" {
		return fmt.Errorf("operator: want a uid (or a Windows SID) and a user name, have %+v", op)
	}
	d, err := store.Open(stateDir)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(op)
	return store.WriteFile(filepath.Join(d.Path, OperatorFile), append(b, '\n'))
}

// ReadOperator returns the recorded operator, or nil when none is recorded.
func ReadOperator(stateDir string) (*Operator, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, OperatorFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("operator record: %w", err)
	}
	var op Operator
	if err := json.Unmarshal(b, &op); err != nil || op.User == "" {
		return nil, fmt.Errorf("operator record %s is malformed; re-run: sudo runos vpn install --operator USER", filepath.Join(stateDir, OperatorFile))
	}
	return &op, nil
}

// Caller is who is on the other end of a local API connection.
type Caller struct {
	Cred platform.PeerCred
	Err  error // the kernel did not say; such a caller may only read
}

// Policy holds the facts a decision needs, injected so decisions are tested
// without real users.
type Policy struct {
	Operator func() (*Operator, error)             // the recorded operator, nil if none
	InGroup  func(uid, gid int, group string) bool // is the user a member of group
	UserName func(uid int) string                  // for messages; "" when unknown
}

// Refusal is a request the daemon will not serve.
type Refusal struct {
	Status  int
	Code    string // localapi.CodeForbidden
	Message string
	Hint    string
}

func (r *Refusal) Error() string { return r.Message }

const codeForbidden = "forbidden" // localapi.CodeForbidden; this package must not import the API it guards

// Check returns nil when caller may make request r, else why not. A
// change is refused by Decide, the same rule the daemon reports to every
// caller in its status.
func (p Policy) Check(r *http.Request, c Caller) *Refusal {
	if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
		return &Refusal{Status: http.StatusForbidden, Code: codeForbidden,
			Message: "requests from web pages are refused (the request carries an Origin or Referer header)",
			Hint:    "use the runos CLI or RunOS Desktop"}
	}
	if r.Host != Host {
		return &Refusal{Status: http.StatusForbidden, Code: codeForbidden,
			Message: fmt.Sprintf("host %q refused: the daemon answers only requests for %s", r.Host, Host),
			Hint:    "curl --unix-socket " + platform.SocketPath() + " http://" + Host + "/v1/status"}
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	if d := p.Decide(c); !d.Control {
		return &Refusal{Status: http.StatusForbidden, Code: codeForbidden, Message: d.Reason, Hint: d.Hint}
	}
	return nil
}

// Decision is whether a caller may change the daemon's state, and why.
type Decision struct {
	Control bool   // may hand over a session, connect, disconnect, end the session
	Reason  string // why (either way), naming the caller
	Hint    string // without Control: what grants it
}

// Decide is the one rule for changing state: root (an administrator on
// Windows), the operator recorded at install and members of the runos
// group may; everyone else, and a caller the kernel did not identify, may
// only read.
func (p Policy) Decide(c Caller) Decision {
	if c.Err == nil {
		if why, ok := p.mayChange(c.Cred); ok {
			return Decision{Control: true, Reason: why + " and may change the VPN state"}
		}
	}
	who := "this user"
	name := ""
	if c.Err == nil && c.Cred.UID >= 0 {
		name = p.userName(c.Cred.UID)
		who = p.who(c.Cred.UID)
	}
	if name == "" {
		name = "$USER"
	}
	msg := fmt.Sprintf("%s may only read the VPN status: changing it is for root, the operator recorded at install and members of the %s group", who, Group)
	if c.Err != nil {
		msg = fmt.Sprintf("the caller's identity is unknown (%v), so it may only read the VPN status", c.Err)
	}
	return Decision{Reason: msg, Hint: "ask an administrator to run: sudo runos vpn install --operator " + name}
}

func (p Policy) userName(uid int) string {
	if p.UserName == nil {
		return ""
	}
	return p.UserName(uid)
}

// who names a uid for messages: "alice (uid 1000)", or "uid 1000".
func (p Policy) who(uid int) string {
	if name := p.userName(uid); name != "" {
		return name + " (uid " + strconv.Itoa(uid) + ")"
	}
	return "uid " + strconv.Itoa(uid)
}

// mayChange reports whether c may change state, and why.
func (p Policy) mayChange(c platform.PeerCred) (string, bool) {
	if c.Admin {
		if c.UID == 0 {
			return "root", true
		}
		return "an administrator", true
	}
	if c.UID < 0 {
		// Windows: no uid, the token's SID names the user.
		if c.SID == "" || p.Operator == nil {
			return "", false
		}
		op, err := p.Operator()
		if err == nil && op != nil && op.SID == c.SID {
			return op.User + " is the operator recorded at install", true
		}
		return "", false
	}
	if p.Operator != nil {
		if op, err := p.Operator(); err == nil && op != nil && op.UID == c.UID {
			return p.who(c.UID) + " is the operator recorded at install", true
		}
	}
	if p.InGroup != nil && p.InGroup(c.UID, c.GID, Group) {
		return p.who(c.UID) + " is a member of the " + Group + " group", true
	}
	return "", false
}
