package api

import (
	"context"
	"net/http"
	"time"
)

// An account's access policy and groups (issue 23): the document of
// control/policy, set and read whole; the groups its rules name.
//
//	GET    /v1/accounts/{aid}/policy                         set-policy: Policy (version 0: none)
//	PUT    /v1/accounts/{aid}/policy                         set-policy: SetPolicyRequest → Policy; 409 conflict
//	                                                         when the version is not newer, 400 policy_invalid
//	POST   /v1/accounts/{aid}/policy/test                    set-policy: PolicyTestRequest → PolicyDecision
//	GET    /v1/accounts/{aid}/groups                         manage-users: []Group
//	POST   /v1/accounts/{aid}/groups                         manage-users: CreateGroupRequest → Group (201)
//	POST   /v1/accounts/{aid}/groups/{name}/members          manage-users: AddMemberRequest → Group
//	DELETE /v1/accounts/{aid}/groups/{name}/members/{email}  manage-users: → Group
//
// Each is allowed to the account's operators (the role, or its token) and
// to a user of the account whom an `operate … -> *: ACTION` rule of its
// policy grants the action named (403 names the rule). By such a rule a
// user changes the members of no group an `operate` rule names: they hand
// out operator verbs.
//
// A join to a cluster the policy does not let the user connect to is
// refused with 403 forbidden, naming the cluster and what to ask for.

// CodePolicyInvalid refuses a policy document that does not parse or names
// an unknown group or cluster (400): Details holds one line per problem,
// each naming its line of the document.
const CodePolicyInvalid = "policy_invalid"

// Policy is an account's policy document in force.
type Policy struct {
	AID string `json:"aid"`
	// Version is the document's version line; 0 with an empty Document
	// when the account has no policy (every user may connect).
	Version  uint64    `json:"version"`
	Document string    `json:"document"`
	SetBy    string    `json:"setBy,omitempty"`
	SetAt    time.Time `json:"setAt,omitzero"`
}

// SetPolicyRequest is the body of PUT /v1/accounts/{aid}/policy.
type SetPolicyRequest struct {
	Document string `json:"document"`
}

// PolicyTestRequest is a question: may User connect To a cluster ("ky3"),
// or reach an address there ("ky3:10.96.0.20:5432", "ky3:10.96.0.20:53/udp").
type PolicyTestRequest struct {
	User string `json:"user"`
	To   string `json:"to"`
}

// PolicyDecision is the answer and what decided it.
type PolicyDecision struct {
	Allow bool `json:"allow"`
	// Line and Rule are the rule that allowed (0 and "" when nothing in
	// the document did: a deny, or an account with no policy).
	Line   int    `json:"line,omitempty"`
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason"`
}

// Group is one of an account's groups of users.
type Group struct {
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

// CreateGroupRequest is the body of POST /v1/accounts/{aid}/groups.
type CreateGroupRequest struct {
	Name string `json:"name"`
}

// AddMemberRequest is the body of POST /v1/accounts/{aid}/groups/{name}/members.
type AddMemberRequest struct {
	Email string `json:"email"`
}

func accountPath(aid string) string { return "/v1/accounts/" + esc(aid) }

// Policy reads the account's policy document.
func (c *Client) Policy(ctx context.Context, aid string) (*Policy, error) {
	var p Policy
	return &p, c.Do(ctx, http.MethodGet, accountPath(aid)+"/policy", nil, &p)
}

// SetPolicy replaces the account's policy by a document with a higher
// version (409 conflict otherwise; 400 policy_invalid for a bad document).
func (c *Client) SetPolicy(ctx context.Context, aid, document string) (*Policy, error) {
	var p Policy
	return &p, c.Do(ctx, http.MethodPut, accountPath(aid)+"/policy", SetPolicyRequest{Document: document}, &p)
}

// TestPolicy asks what the policy in force decides.
func (c *Client) TestPolicy(ctx context.Context, aid string, q PolicyTestRequest) (*PolicyDecision, error) {
	var d PolicyDecision
	return &d, c.Do(ctx, http.MethodPost, accountPath(aid)+"/policy/test", q, &d)
}

// Groups lists the account's groups with their members.
func (c *Client) Groups(ctx context.Context, aid string) ([]Group, error) {
	var gs []Group
	return gs, c.Do(ctx, http.MethodGet, accountPath(aid)+"/groups", nil, &gs)
}

// CreateGroup creates an empty group.
func (c *Client) CreateGroup(ctx context.Context, aid, name string) (*Group, error) {
	var g Group
	return &g, c.Do(ctx, http.MethodPost, accountPath(aid)+"/groups", CreateGroupRequest{Name: name}, &g)
}

// AddGroupMember adds a user to a group.
func (c *Client) AddGroupMember(ctx context.Context, aid, group, email string) (*Group, error) {
	var g Group
	return &g, c.Do(ctx, http.MethodPost, accountPath(aid)+"/groups/"+esc(group)+"/members", AddMemberRequest{Email: email}, &g)
}

// RemoveGroupMember removes a user from a group.
func (c *Client) RemoveGroupMember(ctx context.Context, aid, group, email string) (*Group, error) {
	var g Group
	return &g, c.Do(ctx, http.MethodDelete, accountPath(aid)+"/groups/"+esc(group)+"/members/"+esc(email), nil, &g)
}
