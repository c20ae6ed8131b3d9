// Package access decides who may steer the daemon through its local API.
//
// Reading (GET) is open to every local user. Changing state (a session,
// connect, disconnect, down) is for root (an elevated administrator on
// Windows), the operator recorded at install (operator.json in the state
// directory, written by `runos vpn install` through WriteOperator) and
// members of the runos group (on Windows the local group of that name,
// found in the caller's token). Every request that
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
	"slices"
	"strconv"
	"strings"

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
		return nil, fmt.Errorf("operator record %s is malformed; %s", filepath.Join(stateDir, OperatorFile), systemWords.Grant("USER"))
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
	InGroup  func(uid, gid int, group string) bool // Unix: is the user a member of group
	UserName func(uid int) string                  // for messages; "" when unknown
	// GroupSID is, on Windows, the SID of the local group named group (an
	// error when there is none); a caller identified by SID is a member
	// when its token holds that SID (platform.PeerCred.GroupSIDs).
	GroupSID func(group string) (string, error)
	// AccountName is, on Windows, the DOMAIN\name of a SID, for messages;
	// "" when unknown.
	AccountName func(sid string) string
	// Words are how refusals put the rule on this OS; nil is UnixWords.
	Words *Words
}

// Words are how the rule is put on one OS: who is all-powerful there, how
// its users learn their own name, and the command that grants control.
type Words struct {
	Admin   string // who may always change state: "root"
	Members string // the group's members, as the rule names them
	AnyUser string // stands for the caller's name when it is unknown
	// Grant is the hint to a refused user, naming the account to record.
	Grant func(user string) string
	// Direct is the hint to a client that sent another Host: how to reach
	// the API as the daemon expects.
	Direct func() string
}

// UnixWords: `sudo runos vpn install --operator NAME` records the operator.
var UnixWords = Words{
	Admin:   "root",
	Members: "members of the " + Group + " group",
	AnyUser: "$USER",
	Grant: func(user string) string {
		return "ask an administrator to run: sudo runos vpn install --operator " + user
	},
	Direct: func() string {
		return "curl --unix-socket " + platform.SocketPath() + " http://" + Host + "/v1/status"
	},
}

// WindowsWords: an elevated prompt (no sudo) runs `runos vpn install
// --operator NAME`, where NAME is an account name or DOMAIN\name (what
// the installer's LookupAccountName takes); group membership is the
// token's, fixed at sign-in.
var WindowsWords = Words{
	Admin:   "administrators",
	Members: "members of the local " + Group + " group (from their next sign-in after being added)",
	AnyUser: "%USERNAME%",
	Grant: func(user string) string {
		if strings.ContainsAny(user, " &()^") { // cmd and PowerShell split or read these
			user = `"` + user + `"`
		}
		return `ask an administrator to run, in a terminal opened with "Run as administrator": runos vpn install --operator ` + user
	},
	// curl has no named pipes: the CLI is the client that needs nothing else.
	Direct: func() string {
		return "runos vpn status --json reads it; a client of the named pipe " + platform.SocketPath() + " must send Host: " + Host
	},
}

// GrantHint is what this OS tells a user who may only read: the command an
// administrator runs to make them an operator (for clients of a daemon that
// does not say so itself).
func GrantHint() string { return GrantHintFor("") }

// GrantHintFor is GrantHint naming user ("" = the OS's stand-in, $USER or
// %USERNAME%).
func GrantHintFor(user string) string {
	if user == "" {
		user = systemWords.AnyUser
	}
	return systemWords.Grant(user)
}

// AdminWord is who may always change state on this OS ("root",
// "administrators"), for help texts.
func AdminWord() string { return systemWords.Admin }

func (p Policy) words() *Words {
	if p.Words == nil {
		return &UnixWords
	}
	return p.Words
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
			Hint:    p.words().Direct()}
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
	Control bool // may hand over a session, connect, disconnect, end the session
	// ChangeControl: may also point the daemon at another control server
	// (root, an administrator, the operator recorded at install; not the
	// runos group's other members, who may only sign in to the same one).
	ChangeControl bool
	Reason        string // why (either way), naming the caller
	Hint          string // without Control: what grants it
}

// Decide is the one rule for changing state: root (an elevated
// administrator on Windows), the operator recorded at install and members
// of the runos group may; everyone else, and a caller the kernel did not
// identify, may only read. Refusals are worded with p.Words.
func (p Policy) Decide(c Caller) Decision {
	if c.Err == nil {
		if why, ok := p.mayChange(c.Cred); ok {
			return Decision{Control: true, ChangeControl: c.Cred.Admin || p.isOperator(c.Cred),
				Reason: why + " and may change the VPN state"}
		}
	}
	w := p.words()
	who := "this user"
	name := ""
	switch {
	case c.Err != nil:
	case c.Cred.UID >= 0:
		name = p.userName(c.Cred.UID)
		who = p.who(c.Cred.UID)
	case c.Cred.SID != "":
		if name = p.accountName(c.Cred.SID); name != "" {
			who = name
		}
	}
	if name == "" {
		name = w.AnyUser
	}
	msg := fmt.Sprintf("%s may only read the VPN status: changing it is for %s, the operator recorded at install and %s", who, w.Admin, w.Members)
	if c.Err != nil {
		msg = fmt.Sprintf("the caller's identity is unknown (%v), so it may only read the VPN status", c.Err)
	}
	return Decision{Reason: msg, Hint: w.Grant(name)}
}

func (p Policy) accountName(sid string) string {
	if p.AccountName == nil {
		return ""
	}
	return p.AccountName(sid)
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
		return p.mayChangeBySID(c)
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

// isOperator reports whether c is the operator recorded at install.
func (p Policy) isOperator(c platform.PeerCred) bool {
	if p.Operator == nil {
		return false
	}
	op, err := p.Operator()
	if err != nil || op == nil {
		return false
	}
	if c.UID >= 0 {
		return op.UID == c.UID
	}
	return op.SID != "" && op.SID == c.SID
}

// ChangeControlRefusal is the refusal of a caller who may steer the daemon
// but not point it at another control server (Decision.ChangeControl).
func (p Policy) ChangeControlRefusal(from, to string) *Refusal {
	w := p.words()
	if from == "" {
		return &Refusal{Status: http.StatusForbidden, Code: codeForbidden,
			Message: fmt.Sprintf("choosing the control server this daemon follows (%s) is for %s and the operator recorded at install", to, w.Admin),
			Hint:    "ask one of them to sign in first (runos vpn up); then you may sign in to the same control"}
	}
	return &Refusal{Status: http.StatusForbidden, Code: codeForbidden,
		Message: fmt.Sprintf("changing the control server this daemon follows (from %s to %s) is for %s and the operator recorded at install", from, to, w.Admin),
		Hint:    "sign in to " + from + " (runos config set api-url " + from + "), or ask one of them to sign in to the new one"}
}

// mayChangeBySID is mayChange for a caller without a uid (Windows): the
// token's SID names the user, and its group SIDs say whether it is in the
// local runos group.
func (p Policy) mayChangeBySID(c platform.PeerCred) (string, bool) {
	if c.SID == "" {
		return "", false
	}
	if p.Operator != nil {
		if op, err := p.Operator(); err == nil && op != nil && op.SID != "" && op.SID == c.SID {
			return op.User + " is the operator recorded at install", true
		}
	}
	if p.GroupSID != nil && len(c.GroupSIDs) > 0 {
		if g, err := p.GroupSID(Group); err == nil && g != "" && slices.Contains(c.GroupSIDs, g) {
			who := p.accountName(c.SID)
			if who == "" {
				who = c.SID
			}
			return who + " is a member of the local " + Group + " group", true
		}
	}
	return "", false
}
