package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/policy"
)

// Who may use an account-wide operator action (policy.ManageUsers,
// ManageTokens, SetPolicy, ReadAudit) on an account: the operator role
// there or the account's token, as before there were policies, or, for a
// signed-in user of the account, an `operate … -> *: ACTION` rule of its
// policy. cluster() (clusters.go) answers the same for the per-cluster
// actions; this is the one place that answers it for the account-wide ones.
//
// A grant by a rule is narrower than the role in what it may touch, so
// that a grant cannot outgrow the document that made it:
//   - no operator token is created by it (tokens.go, tokenAccount): a token
//     carries every operator action and outlives both the rule and its
//     grantee;
//   - it does not change who holds operator actions (users.go, groups.go):
//     no removing an operator or a user a rule grants an action, no
//     changing the members of a group an operate rule names. Otherwise
//     manage-users would be every action: add yourself to the group the
//     widest rule names.
//
// set-policy has no such bound: writing rules is what it grants, so it is
// as strong as every action a rule can grant (never the role, which only
// the world file gives).

// grantKind is how a caller holds an account-wide action.
type grantKind uint8

const (
	byRole grantKind = iota + 1 // the operator role in the account, or its token
	byRule                      // an operate rule of the account's policy
)

// mayAccount decides whether p may use the account-wide action a on aid:
// how, or 0 with the decision's reason (none for a caller outside aid).
func mayAccount(rd store.Reader, p *principal, aid string, a policy.Action) (grantKind, string, error) {
	if p.canOperate(aid) {
		return byRole, "", nil
	}
	if p.kind != kindUser || !p.user.InAccount(aid) {
		return 0, "", nil
	}
	pol, subj, err := operateSubject(rd, p, aid)
	if err != nil {
		return 0, "", err
	}
	d := pol.MayOperate(subj, "", a)
	if !d.Allow {
		return 0, d.Reason, nil
	}
	return byRule, "", nil
}

// accountAction is the account an account-wide action is about, checked
// for the caller: aid (?aid=, the body's or the path's), else the caller's
// only account where it may use a. An account's token keeps
// operatedAccount's answers; a user is answered 404 for an account not
// theirs (as an operator is for one they do not operate: nothing is told
// of other accounts) and 403 naming the rule that would grant a in one of
// theirs.
func accountAction(rd store.Reader, p *principal, aid string, a policy.Action) (string, grantKind, error) {
	if p.kind != kindUser {
		aid, err := operatedAccount(p, aid)
		return aid, byRole, err
	}
	mine := p.accounts()
	switch {
	case len(mine) == 0:
		return "", 0, errForbidden(fmt.Sprintf("%s needs the operator role on an account or an `operate … -> *: %s` rule in its policy, and %s belongs to no account", a, a, p.user.Email),
			"ask an operator to add you to their account")
	case aid != "" && !slices.Contains(mine, aid):
		return "", 0, errNotFound("no account %s among your accounts (%s)", aid, strings.Join(mine, ", "))
	case aid != "":
		how, why, err := mayAccount(rd, p, aid, a)
		if err == nil && how == 0 {
			err = errAccountAction(a, aid, why)
		}
		return aid, how, err
	}
	gs, err := grantsOf(rd, p, a)
	switch {
	case err != nil:
		return "", 0, err
	case len(gs) > 1:
		return "", 0, errInvalid("you may %s in several accounts (%s): say which with aid", a, strings.Join(aidsOf(gs), ", "))
	}
	return gs[0].aid, gs[0].how, nil
}

// accountsAction are the accounts a listing of an account-wide action is
// about (the audit log): aid, else every account of the caller's where it
// may use a.
func accountsAction(rd store.Reader, p *principal, aid string, a policy.Action) ([]string, error) {
	if p.kind != kindUser {
		return operatedAccounts(p, aid)
	}
	if aid != "" || len(p.accounts()) == 0 {
		aid, _, err := accountAction(rd, p, aid, a)
		return []string{aid}, err
	}
	gs, err := grantsOf(rd, p, a)
	return aidsOf(gs), err
}

// grant is an account where the caller may use an action, and how.
type grant struct {
	aid string
	how grantKind
}

func aidsOf(gs []grant) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.aid
	}
	return out
}

// grantsOf are the user's accounts where they may use a; none is the
// refusal (naming the rule when they belong to one account only).
func grantsOf(rd store.Reader, p *principal, a policy.Action) ([]grant, error) {
	mine := p.accounts()
	var gs []grant
	why := ""
	for _, aid := range mine {
		how, reason, err := mayAccount(rd, p, aid, a)
		if err != nil {
			return nil, err
		}
		if how != 0 {
			gs = append(gs, grant{aid, how})
		}
		why = reason
	}
	switch {
	case len(gs) > 0:
		return gs, nil
	case len(mine) == 1:
		return nil, errAccountAction(a, mine[0], why)
	}
	return nil, errForbidden(fmt.Sprintf("%s needs the operator role on an account, its operator token, or an `operate … -> *: %s` rule in its policy: none of your accounts (%s) grants it to %s",
		a, a, strings.Join(mine, ", "), p.user.Email), grantHint)
}

const grantHint = "sign in as an operator with `runos login`, set RUNOS_TOKEN to the account's operator token, or ask an operator for the rule"

// errAccountAction refuses a on aid, as cluster() refuses a cluster's
// action: what would grant it, and why the policy did not.
func errAccountAction(a policy.Action, aid, why string) error {
	if why != "" {
		why = ": " + why
	}
	return errForbidden(fmt.Sprintf("%s on account %s needs the operator role there, its operator token, or an `operate … -> *: %s` rule in its policy%s", a, aid, a, why), grantHint)
}

// ruleGrants are the account-wide actions rules grant the user, by
// account (an account they operate is left out: the role holds them all),
// for /v1/me. The policy and the user's groups are read once per account,
// not once per action.
func ruleGrants(rd store.Reader, p *principal) (map[string][]string, error) {
	var out map[string][]string
	for _, aid := range p.accounts() {
		if p.canOperate(aid) || p.kind != kindUser || !p.user.InAccount(aid) {
			continue
		}
		pol, subj, err := operateSubject(rd, p, aid)
		if err != nil {
			return nil, err
		}
		for _, a := range policy.Actions {
			if !policy.AccountWide(a) || !pol.MayOperate(subj, "", a).Allow {
				continue
			}
			if out == nil {
				out = map[string][]string{}
			}
			out[aid] = append(out[aid], string(a))
		}
	}
	return out, nil
}

// operateSubject reads what an operate rule is decided on in aid: the
// account's policy and the user, with their groups, as its subject.
func operateSubject(rd store.Reader, p *principal, aid string) (*policy.Policy, policy.Subject, error) {
	pol, _, err := accountPolicy(rd, aid)
	if err != nil {
		return nil, policy.Subject{}, err
	}
	subj, err := subject(rd, aid, p.user)
	return pol, subj, err
}

// mayRemoveByRule refuses a removal by a manage-users rule of a user who
// holds operator actions in aid: the role, or a rule's grant (see above).
func mayRemoveByRule(rd store.Reader, aid string, u model.User) error {
	hint := fmt.Sprintf("ask an operator of %s to remove them", aid)
	if u.OperatorOf(aid) {
		return errForbidden(fmt.Sprintf("removing %s from %s needs the operator role there: they are an operator of it, and a grant by the policy does not reach those who hold operator actions", u.Email, aid), hint)
	}
	pol, _, err := accountPolicy(rd, aid)
	if err != nil {
		return err
	}
	subj, err := subject(rd, aid, u)
	if err != nil {
		return err
	}
	if r := pol.OperateRuleFor(subj); r != nil {
		return errForbidden(fmt.Sprintf("removing %s from %s needs the operator role there: line %d of its policy (%s) grants them operator actions, and a grant by the policy does not reach those who hold them", u.Email, aid, r.Line, r), hint)
	}
	return nil
}

// mayChangeGroupByRule refuses a change of the members of a group an
// operate rule names, by a manage-users rule (see above).
func mayChangeGroupByRule(rd store.Reader, aid, group string) error {
	pol, _, err := accountPolicy(rd, aid)
	if err != nil {
		return err
	}
	if r := pol.OperateRuleNaming(group); r != nil {
		return errForbidden(fmt.Sprintf("changing the members of group %s of %s needs the operator role there: line %d of its policy (%s) grants its members operator actions, and a grant by the policy does not hand them out", group, aid, r.Line, r),
			fmt.Sprintf("ask an operator of %s to change it", aid))
	}
	return nil
}
