package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/oauth"
	"github.com/runos/vpn/control/oidc"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/policy"
)

// SignInIdentity implements oauth.IdentityBackend: a user the identity
// provider signed in is found, or created (with no password) in
// Config.IdentityAccount on their first sign-in (put back in it when an
// operator had removed them), and their membership of
// that account's groups is set to the provider's groups of the same
// names, at every sign-in. Provider groups with no RunOS group of that
// name are left out: groups are created with `runos groups create`, the
// policy naming them.
func (s *Server) SignInIdentity(ctx context.Context, id oidc.Identity) (string, error) {
	aid := s.cfg.IdentityAccount
	if aid == "" {
		return "", errors.New("sign-in through the identity provider: no account configured for its users")
	}
	email, err := policy.CheckEmail(strings.TrimSpace(id.Email))
	if err != nil {
		return "", oauth.Refusal("The identity provider did not give a usable email address for you (" + err.Error() + "). Ask your administrator.")
	}
	var did string
	err = s.update(ctx, func(w store.Writer) error {
		u, err := w.User(email)
		switch {
		case errors.Is(err, store.ErrNotFound):
			u = model.User{Email: email, Accounts: []string{aid}}
			if err := w.PutUser(u); err != nil {
				return err
			}
			did = "created at first sign-in through the identity provider; "
		case err != nil:
			return err
		case len(u.Accounts) == 0: // removed by an operator (users.go): the provider still lets them in
			if err := w.AddUserToAccount(aid, u.Email); err != nil {
				return err
			}
			u.Accounts = []string{aid}
			did = "added again at sign-in through the identity provider (removed from the account before); "
		case !u.InAccount(aid):
			return oauth.Refusal(fmt.Sprintf("%s is a RunOS user of another account, not of %s, which this sign-in is for. Ask your administrator.", u.Email, aid))
		}
		email = u.Email
		if err := s.keepGrant(w, email, id); err != nil {
			return err
		}
		return s.applyIdentityGroups(ctx, w, email, id.Groups, did)
	})
	if err != nil {
		var refusal oauth.Refusal
		if errors.As(err, &refusal) {
			return "", refusal
		}
		return "", fmt.Errorf("sign in %s through the identity provider: %w", email, err)
	}
	return email, nil
}

// PasswordUsers implements oauth.PasswordBackend: whether any user still
// signs in with a password (the login pages show the password form only
// then, once an identity provider signs the others in).
func (s *Server) PasswordUsers(ctx context.Context) (bool, error) {
	var some bool
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		some, err = r.PasswordUsers()
		return err
	})
	return some, err
}

var _ oauth.PasswordBackend = (*Server)(nil)

// applyIdentityGroups sets email's groups in the identity account to the
// provider's, and records what changed (and did, what else happened to
// the user) in the audit log; nothing changed, nothing is recorded.
func (s *Server) applyIdentityGroups(ctx context.Context, w store.Writer, email string, groups []string, did string) error {
	aid := s.cfg.IdentityAccount
	changed, err := setIdentityGroups(w, aid, email, groups)
	if err != nil {
		return err
	}
	if did == "" && changed == "" {
		return nil
	}
	if err := touchGateways(w, aid); err != nil {
		return err
	}
	return audit.Record(w, audit.Entry{At: s.now(), AIDs: []string{aid}, Actor: audit.Control, Source: audit.Source(ctx),
		Kind: audit.GroupChanged, Target: email, Outcome: did + "groups from the identity provider: " + changed})
}

// setIdentityGroups makes email's groups in aid the provider's groups that
// exist there, and says what changed ("" for nothing).
func setIdentityGroups(w store.Writer, aid, email string, from []string) (string, error) {
	all, err := w.Groups(aid)
	if err != nil {
		return "", err
	}
	var want []string
	for _, g := range all {
		if slices.Contains(from, g.Name) {
			want = append(want, g.Name)
		}
	}
	have, err := w.UserGroups(aid, email)
	if err != nil {
		return "", err
	}
	var changes []string
	for _, g := range want {
		if !slices.Contains(have, g) {
			if err := w.PutGroupMember(aid, g, email); err != nil {
				return "", err
			}
			changes = append(changes, "+"+g)
		}
	}
	for _, g := range have {
		if !slices.Contains(want, g) {
			if err := w.DeleteGroupMember(aid, g, email); err != nil {
				return "", err
			}
			changes = append(changes, "-"+g)
		}
	}
	return strings.Join(changes, " "), nil
}
