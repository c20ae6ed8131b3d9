package store

import "github.com/runos/vpn/control/model"

// UsersReader reads an account's users (`runos users list`).
type UsersReader interface {
	// Users lists the users of the account, by email, each as User reads
	// them (every account of theirs, and their roles).
	Users(aid string) ([]model.User, error)
}

// UsersWriter takes users out of accounts and puts them back.
type UsersWriter interface {
	// RemoveUserFromAccount takes the user (any case) out of aid: their
	// role there and their membership of aid's groups. A user left in no
	// account keeps their record, so that their ended sessions still say
	// why to their daemons, but loses their password: nothing signs them
	// in again but an identity provider. ErrNotFound when the user is not
	// in aid.
	RemoveUserFromAccount(aid, email string) error
	// AddUserToAccount puts an existing user (any case) in aid, with no
	// role: ErrNotFound for no such user, ErrExists when already in it.
	AddUserToAccount(aid, email string) error
}
