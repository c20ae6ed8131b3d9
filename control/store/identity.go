package store

import "github.com/runos/vpn/control/model"

// IdentityReader reads what control keeps of sign-ins through the
// identity provider (issue 23), one grant per user: the last sign-in's.
type IdentityReader interface {
	// IdentityGrants lists every user's grant, by email.
	IdentityGrants() ([]model.IdentityGrant, error)
	// IdentityGrant is the user's (email any case): ErrNotFound when none.
	IdentityGrant(email string) (model.IdentityGrant, error)
	// PasswordUsers reports whether any user has a password: the login
	// page shows its password form only then, once an identity provider
	// signs everyone else in.
	PasswordUsers() (bool, error)
}

// IdentityWriter changes them.
type IdentityWriter interface {
	// PutIdentityGrant sets the user's grant (email lowercased), replacing
	// the one before.
	PutIdentityGrant(model.IdentityGrant) error
	// DeleteIdentityGrant forgets the user's grant: ErrNotFound when none.
	DeleteIdentityGrant(email string) error
}
