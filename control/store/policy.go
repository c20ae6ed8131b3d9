package store

import "github.com/runos/vpn/control/model"

// PolicyReader reads an account's access policy and groups (issue 23).
type PolicyReader interface {
	// Policy is the account's policy document in force; ErrNotFound when
	// none was ever set (every user may connect, as before policies).
	Policy(aid string) (model.Policy, error)
	// Groups lists the account's groups with their members, by name.
	Groups(aid string) ([]model.Group, error)
	// UserGroups lists the names of the account's groups the user (any
	// case) is a member of, sorted.
	UserGroups(aid, email string) ([]string, error)
}

// PolicyWriter changes them. Whether a document is valid and newer is the
// logic's question (control/policy, asked in the same transaction); the
// store keeps versions from going backwards all the same.
type PolicyWriter interface {
	// PutPolicy sets the account's document, keeping the one it replaces
	// in the history: ErrExists when the version in force is not lower.
	PutPolicy(model.Policy) error
	// PutGroup creates an empty group (ErrExists when the name is taken).
	PutGroup(aid, name string) error
	// PutGroupMember adds a member (email lowercased) to an existing group:
	// ErrNotFound for no such group, ErrExists when already a member.
	PutGroupMember(aid, group, email string) error
	// DeleteGroupMember removes a member: ErrNotFound when not one.
	DeleteGroupMember(aid, group, email string) error
}
