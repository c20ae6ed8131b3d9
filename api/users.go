package api

import (
	"context"
	"net/http"
)

// An account's users, and how an operator removes one (issue 23: removing
// a user ends their access at once).
//
//	GET    /v1/accounts/{aid}/users          manage-users: []User
//	DELETE /v1/accounts/{aid}/users/{email}  manage-users: → RemovedUser; 404 for a user not in
//	                                         the account, 409 for the caller themselves
//
// manage-users is the account's operators' (the role, or its token), and
// a user's whom an `operate … -> *: manage-users` rule of its policy
// grants it; by such a rule a user removes no one who holds operator verbs
// (the role, or a rule's), 403.

// User is a user of an account as its operators see them.
type User struct {
	Email    string   `json:"email"`
	Operator bool     `json:"operator"` // has the operator role in the account
	Groups   []string `json:"groups"`   // the account's groups they are a member of
	// Password: they may sign in with a password (from the world file);
	// false for a user the identity provider signs in.
	Password bool `json:"password"`
}

// RemovedUser is what removing a user did.
type RemovedUser struct {
	Email string `json:"email"`
	AID   string `json:"aid"`
	// Sessions are the sessions ended (the user's every live session,
	// unless they also belong to other accounts: see Elsewhere).
	Sessions []string `json:"sessions"`
	// Devices are the devices removed, off every gateway at once.
	Devices []string `json:"devices"`
	// Cut are the devices taken off the account's clusters only, when the
	// user also belongs to other accounts.
	Cut []string `json:"cut,omitempty"`
	// Groups are the account's groups the user left.
	Groups []string `json:"groups"`
	// Elsewhere: the user also belongs to other accounts, so their
	// sessions and devices were kept for those; only this account's
	// clusters and groups lost them.
	Elsewhere bool `json:"elsewhere,omitempty"`
}

// Users lists the account's users.
func (c *Client) Users(ctx context.Context, aid string) ([]User, error) {
	var us []User
	return us, c.Do(ctx, http.MethodGet, accountPath(aid)+"/users", nil, &us)
}

// RemoveUser removes a user from the account: their sessions end and their
// devices leave every gateway at once.
func (c *Client) RemoveUser(ctx context.Context, aid, email string) (*RemovedUser, error) {
	var out RemovedUser
	return &out, c.Do(ctx, http.MethodDelete, accountPath(aid)+"/users/"+esc(email), nil, &out)
}
