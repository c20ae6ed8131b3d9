package sqlstore

import (
	"strings"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store/internal/sqlcol"
)

// Users reads the account's users with every account and role of theirs
// in one statement, whatever their number: `runos users list` was a query
// for the emails and two more per user.
func (t *tx) Users(aid string) ([]model.User, error) {
	type row struct {
		email, hash, aid string
		operator         bool
	}
	rows, err := list(t.conn, "users of "+aid, func(r sqlcol.Row) (row, error) {
		var x row
		return x, r.Scan(&x.email, &x.hash, &x.aid, &x.operator)
	}, `SELECT u.email, u.password_hash, a.aid, a.operator
		FROM user_accounts m JOIN users u ON u.email = m.email JOIN user_accounts a ON a.email = u.email
		WHERE m.aid = ? ORDER BY u.email, a.aid`, aid)
	if err != nil {
		return nil, err
	}
	out := []model.User{}
	for _, x := range rows {
		if len(out) == 0 || out[len(out)-1].Email != x.email {
			out = append(out, model.User{Email: x.email, PasswordHash: x.hash})
		}
		addRole(&out[len(out)-1], x.aid, x.operator)
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
