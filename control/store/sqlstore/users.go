package sqlstore

import (
	"strings"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

func (t *tx) Users(aid string) ([]model.User, error) {
	emails, err := list(t.conn, "users of "+aid, func(r sqlcol.Row) (string, error) {
		var e string
		return e, r.Scan(&e)
	}, "SELECT email FROM user_accounts WHERE aid = ? ORDER BY email", aid)
	if err != nil {
		return nil, err
	}
	out := make([]model.User, 0, len(emails))
	for _, e := range emails {
		u, err := t.User(e)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// userEmail is the user's email as it was stored (users are found
// without regard to case; their rows elsewhere hold it as stored).
func (t *tx) userEmail(email string) (string, error) {
	var stored string
	err := t.row("SELECT email FROM users WHERE lower(email) = lower(?)", email).Scan(&stored)
	return stored, t.one(err, "user "+email)
}

func (t *tx) RemoveUserFromAccount(aid, email string) error {
	stored, err := t.userEmail(email)
	if err != nil {
		return err
	}
	what := "user " + stored + " in account " + aid
	if err := t.update(what, "DELETE FROM user_accounts WHERE email = ? AND aid = ?", stored, aid); err != nil {
		return err
	}
	if _, err := t.exec("DELETE FROM group_members WHERE aid = ? AND email = ?", aid, strings.ToLower(stored)); err != nil {
		return t.fail(err, "groups of "+what)
	}
	// Left in no account: no password signs them in anywhere.
	_, err = t.exec("UPDATE users SET password_hash = '' WHERE email = ? AND NOT EXISTS (SELECT 1 FROM user_accounts WHERE email = ?)", stored, stored)
	return t.fail(err, "password of user "+stored)
}

func (t *tx) AddUserToAccount(aid, email string) error {
	stored, err := t.userEmail(email)
	if err != nil {
		return err
	}
	return t.insert("user "+stored+" in account "+aid, "INSERT INTO user_accounts (email, aid, operator) VALUES (?, ?, ?)", stored, aid, false)
}
