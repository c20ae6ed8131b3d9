package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/token"
	"github.com/runos/vpn/policy"
)

// Operator API tokens: created by a signed-in operator (a token may not
// make tokens, or a leaked one could outlive its own revocation; nor may a
// manage-tokens rule, see tokenAccount), listed without their secret,
// revoked by id or name (by operators, the account's tokens, and users a
// manage-tokens rule lets). The world file's token is one of them, named
// world-file.

// tokenRefusal is the clear 401 of a revoked or expired token, nil when
// it may be used.
func tokenRefusal(k model.APIToken, now time.Time) *api.Error {
	hint := "an operator creates a new one with `runos tokens create --name " + k.Name + "` (after `runos login`)"
	switch {
	case !k.RevokedAt.IsZero():
		return &api.Error{Status: 401, Code: api.CodeTokenRevoked, At: k.RevokedAt.UTC(), Hint: hint,
			Message: fmt.Sprintf("the operator token %q was revoked at %s by %s", k.Name, k.RevokedAt.UTC().Format(time.RFC3339), k.RevokedBy)}
	case k.Expired(now):
		return &api.Error{Status: 401, Code: api.CodeTokenExpired, At: k.ExpiresAt.UTC(), Hint: hint,
			Message: fmt.Sprintf("the operator token %q expired at %s", k.Name, k.ExpiresAt.UTC().Format(time.RFC3339))}
	}
	return nil
}

// usedEvery is how often a token's "last used" is written: a script
// calling control in a loop must not make every call a write.
const usedEvery = time.Minute

// tokenUsed records that k was used at now (at most once per usedEvery).
func (s *Server) tokenUsed(ctx context.Context, k model.APIToken, now time.Time) {
	if due, _ := s.used.due(k.ID, now); !due {
		return
	}
	_, err := s.st.Update(ctx, func(tx store.Writer) error {
		cur, err := tx.APIToken(k.ID)
		if err != nil {
			return err
		}
		cur.LastUsed = now
		return tx.UpdateAPIToken(cur)
	})
	if err != nil {
		s.log.Warn("record token use", "token", k.Name, "err", err)
	}
}

func tokenDoc(k model.APIToken, now time.Time) api.APIToken {
	d := api.APIToken{ID: k.ID, AID: k.AID, Name: k.Name, State: api.TokenActive, CreatedAt: k.CreatedAt, CreatedBy: k.CreatedBy,
		ExpiresAt: k.ExpiresAt, LastUsed: k.LastUsed, RevokedAt: k.RevokedAt, RevokedBy: k.RevokedBy}
	switch {
	case !k.RevokedAt.IsZero():
		d.State = api.TokenRevoked
	case k.Expired(now):
		d.State = api.TokenExpired
	}
	return d
}

var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkTokenName(name string) *api.Error {
	switch {
	case !tokenName.MatchString(name):
		return errInvalid("name %q: want 1 to 64 letters, digits, dots, dashes or underscores, starting with a letter or digit", name)
	case strings.HasPrefix(name, "tok-"):
		return errInvalid("name %q: names may not start with tok- (token ids do)", name)
	}
	return nil
}

// operatedAccount is the account an operator verb is about: ?aid= (or the
// body's), else the caller's only operated account.
func operatedAccount(p *principal, aid string) (string, error) {
	mine := p.operated()
	switch {
	case len(mine) == 0:
		return "", errNotOperator
	case aid != "":
		if slices.Contains(mine, aid) {
			return aid, nil
		}
		return "", errNotFound("no account %s among the accounts you operate (%s)", aid, strings.Join(mine, ", "))
	case len(mine) > 1:
		return "", errInvalid("you operate several accounts (%s): say which with aid", strings.Join(mine, ", "))
	}
	return mine[0], nil
}

// tokenAccount is the account a signed-in user creates a token in: one
// they hold the operator role in (aid, or their only one). A manage-tokens
// rule lists and revokes tokens but creates none: a token carries every
// operator action and outlives the rule and its grantee, so creating one
// by a rule would turn a grant the policy can take back into one it
// cannot (accountwide.go).
func tokenAccount(rd store.Reader, p *principal, aid string) (string, error) {
	if aid == "" {
		aid, err := operatedAccount(p, "")
		if errors.Is(err, errNotOperator) {
			return "", errCreateToken("")
		}
		return aid, err
	}
	aid, how, err := accountAction(rd, p, aid, policy.ManageTokens)
	if isForbidden(err) || err == nil && how == byRule {
		return "", errCreateToken(aid)
	}
	return aid, err
}

func errCreateToken(aid string) *api.Error {
	on := "an account"
	if aid != "" {
		on = "account " + aid
	}
	return errForbidden("creating an operator token needs the operator role on "+on+": an `operate … -> *: manage-tokens` rule lists and revokes tokens but creates none, since a token carries every operator action and outlives the rule",
		"ask an operator of the account to create it (runos login, then runos tokens create)")
}

func isForbidden(err error) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Code == api.CodeForbidden
}

func (s *Server) handleCreateToken(w http.ResponseWriter, r *http.Request, p *principal) {
	if p.kind != kindUser {
		writeError(w, errForbidden("an operator token cannot create tokens: a leaked one could outlive its own revocation",
			"sign in as an operator with `runos login`, then `runos tokens create`"))
		return
	}
	var req api.CreateTokenRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	req.Name = strings.TrimSpace(req.Name)
	if e := checkTokenName(req.Name); e != nil {
		writeError(w, e)
		return
	}
	ttl := time.Duration(req.ExpiresInSeconds) * time.Second
	switch {
	case req.ExpiresInSeconds == 0:
		ttl = api.DefaultTokenTTL
	case req.ExpiresInSeconds < 60 || ttl > api.MaxTokenTTL:
		writeError(w, errInvalid("expiresInSeconds %d: want a minute to %d days (default %d days)",
			req.ExpiresInSeconds, int(api.MaxTokenTTL/(24*time.Hour)), int(api.DefaultTokenTTL/(24*time.Hour))))
		return
	}
	now := s.now()
	secret := token.New()
	k := model.APIToken{ID: token.ID("tok"), Name: req.Name, Hash: token.Hash(secret), CreatedAt: now,
		CreatedBy: p.actor().String(), ExpiresAt: now.Add(ttl)}
	err := s.update(r.Context(), func(tx store.Writer) error {
		var err error
		if k.AID, err = tokenAccount(tx, p, req.AID); err != nil {
			return err
		}
		if err := tx.PutAPIToken(k); errors.Is(err, store.ErrExists) {
			return errConflict(fmt.Sprintf("account %s has a live token named %s", k.AID, k.Name),
				"choose another name, or revoke that one first: runos tokens revoke "+k.Name)
		} else if err != nil {
			return err
		}
		return s.record(tx, r, p, audit.Entry{AIDs: []string{k.AID}, Kind: audit.TokenCreated, Target: k.Name,
			Outcome: fmt.Sprintf("token %s, expires %s", k.ID, k.ExpiresAt.UTC().Format(time.RFC3339))})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("operator token created", "aid", k.AID, "token", k.ID, "name", k.Name, "by", p.actor().String(), "expires", k.ExpiresAt)
	writeJSON(w, http.StatusCreated, api.CreatedToken{APIToken: tokenDoc(k, now), Token: secret})
}

func (s *Server) handleTokens(w http.ResponseWriter, r *http.Request, p *principal) {
	out := []api.APIToken{}
	now := s.now()
	err := s.st.View(r.Context(), func(rd store.Reader) error {
		aid, _, err := accountAction(rd, p, r.URL.Query().Get("aid"), policy.ManageTokens)
		if err != nil {
			return err
		}
		ks, err := rd.APITokens(aid)
		for _, k := range ks {
			out = append(out, tokenDoc(k, now))
		}
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// findToken is a token of aid by id, else the live one by name, else the
// newest revoked or expired one by that name.
func findToken(rd store.Reader, aid, idOrName string) (model.APIToken, error) {
	ks, err := rd.APITokens(aid)
	if err != nil {
		return model.APIToken{}, err
	}
	var byName *model.APIToken
	for i := range ks {
		k := &ks[i]
		switch {
		case k.ID == idOrName:
			return *k, nil
		case k.Name == idOrName && (byName == nil || k.RevokedAt.IsZero()):
			byName = k
		}
	}
	if byName == nil {
		return model.APIToken{}, errNotFound("no token %s in account %s (list them: runos tokens list)", idOrName, aid)
	}
	return *byName, nil
}

func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request, p *principal) {
	now := s.now()
	var k model.APIToken
	err := s.update(r.Context(), func(tx store.Writer) error {
		aid, _, err := accountAction(tx, p, r.URL.Query().Get("aid"), policy.ManageTokens)
		if err != nil {
			return err
		}
		if k, err = findToken(tx, aid, r.PathValue("id")); err != nil {
			return err
		}
		if !k.RevokedAt.IsZero() {
			return errConflict(fmt.Sprintf("token %s (%s) was already revoked at %s by %s", k.Name, k.ID, k.RevokedAt.UTC().Format(time.RFC3339), k.RevokedBy), "")
		}
		k.RevokedAt, k.RevokedBy = now, p.actor().String()
		if err := tx.UpdateAPIToken(k); err != nil {
			return err
		}
		return s.record(tx, r, p, audit.Entry{AIDs: []string{k.AID}, Kind: audit.TokenRevoked, Target: k.Name,
			Outcome: "token " + k.ID + " refused from now on"})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("operator token revoked", "aid", k.AID, "token", k.ID, "name", k.Name, "by", p.actor().String())
	writeJSON(w, http.StatusOK, tokenDoc(k, now))
}
