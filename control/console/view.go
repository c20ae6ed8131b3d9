package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/policy"
)

// auditShown is how many of the latest audit entries the page shows.
const auditShown = 10

// client is the API as the browser's user, in-process. Call it with c.ctx
// of the browser's request, so that the API sees the browser's address.
func (c *Console) client(token string) *api.Client {
	return &api.Client{BaseURL: c.issuer.String(), Token: token, HTTP: c.api}
}

// ctx is a request's context carrying the browser's address to the API.
func (c *Console) ctx(r *http.Request) context.Context { return withRemote(r.Context(), r.RemoteAddr) }

func oauth2ctx(r *http.Request, hc *http.Client) context.Context {
	return context.WithValue(withRemote(r.Context(), r.RemoteAddr), oauth2.HTTPClient, hc)
}

// view is everything the page shows.
type view struct {
	User     string
	Operator bool   // of some account: every device of its clusters, with Revoke
	Operates string // the accounts they operate
	Grants   string // what the policies grant a user who is no operator there, for the header
	CSRF     string
	Since    uint64 // the hub's version the view was read at (the live stream's start)

	// What the sections below show: the operator role or a rule granting
	// the account-wide action (read-audit, manage-users, set-policy).
	ShowAudit, ShowUsers, ShowPolicy bool

	Clusters []clusterView
	Mine     []deviceRow // a user who is no operator: their own devices
	Audit    []api.AuditEntry
	Policies []api.Policy // each account's access policy they may set
	Users    []userRow    // each account's users they may manage
}

type userRow struct {
	AID, Email, Groups string
	Operator, Password bool
	Self               bool // the signed-in user: no Remove button
	// Removable: a Remove button. Not for an operator when the viewer
	// manages users by a rule, which the API refuses (it does not reach
	// those who hold operator actions; a user a rule grants them is
	// refused by the API too, which the page cannot tell).
	Removable bool
}

// may reports whether me may use the account-wide action a on aid: the
// operator role, or a rule of its policy (Me.May, as control decides it).
func may(me *api.Me, aid string, a policy.Action) bool {
	return slices.Contains(me.Operates, aid) || slices.Contains(me.May[aid], string(a))
}

// mayAnywhere reports whether me may use a on some account.
func mayAnywhere(me *api.Me, a policy.Action) bool {
	for _, aid := range me.Accounts {
		if may(me, aid, a) {
			return true
		}
	}
	return false
}

type clusterView struct {
	CID, Name, Domain string
	Service           *api.VPNService
	Move              *api.Move
	Devices           []deviceRow // operators: the devices joined, not revoked
}

type deviceRow struct {
	ID, User, Name, OS, Address, State string
	Clusters                           string
	Handshake                          time.Time // with this cluster, or the newest
}

// errSignedOut means the session cookie is missing or control refuses it.
var errSignedOut = errors.New("signed out")

// load reads the view for the session token, and the topics whose change
// makes a new one.
func (c *Console) load(ctx context.Context, cl *api.Client) (*view, []*hub.Topic, error) {
	since := c.cfg.Hub.Global()
	me, err := cl.Me(ctx)
	if err != nil {
		return nil, nil, refused(err)
	}
	if me.User == "" {
		return nil, nil, errSignedOut // an operator token is no console sign-in
	}
	v := &view{User: me.User, Operator: me.Operator, Operates: strings.Join(me.Operates, ", "), Grants: grantsText(me),
		CSRF: csrfToken(cl.Token), Since: since, ShowAudit: mayAnywhere(me, policy.ReadAudit),
		ShowUsers: mayAnywhere(me, policy.ManageUsers), ShowPolicy: mayAnywhere(me, policy.SetPolicy)}
	topics := []*hub.Topic{c.cfg.Hub.Topic(hub.Session(me.SessionID))}
	for _, aid := range me.Accounts {
		topics = append(topics, c.cfg.Hub.Topic(hub.Account(aid)))
	}
	cs, err := cl.Clusters(ctx)
	if err != nil {
		return nil, nil, refused(err)
	}
	var devs []api.DeviceDetail
	if me.Operator {
		devs, err = cl.Devices(ctx, api.DeviceQuery{})
	} else {
		devs, err = cl.MyDevices(ctx)
	}
	if err != nil {
		return nil, nil, refused(err)
	}
	for _, cc := range cs {
		cv := clusterView{CID: cc.CID, Name: cc.Name, Domain: cc.Domain}
		topics = append(topics, c.cfg.Hub.Topic(hub.Cluster(cc.CID)))
		svcs, err := cl.VPNServices(ctx, cc.CID)
		if err != nil {
			return nil, nil, refused(err)
		}
		if len(svcs) > 0 {
			svc := svcs[0]
			cv.Service = &svc
			topics = append(topics, c.cfg.Hub.Topic(hub.Service(svc.ID)))
			if svc.LatestMoveID != "" {
				m, err := cl.Move(ctx, svc.LatestMoveID, 0, 0)
				if err != nil {
					return nil, nil, refused(err)
				}
				cv.Move = m
				topics = append(topics, c.cfg.Hub.Topic(hub.Move(m.ID)))
			}
		}
		if me.Operator {
			cv.Devices = rowsOf(devs, cc.CID)
		}
		v.Clusters = append(v.Clusters, cv)
	}
	if !me.Operator {
		v.Mine = rowsOf(devs, "")
	}
	if v.ShowAudit {
		page, err := cl.Audit(ctx, api.AuditQuery{Limit: auditShown})
		if err != nil && !withdrawn(err) {
			return nil, nil, refused(err)
		}
		if err == nil {
			v.Audit = page.Entries
		}
	}
	for _, aid := range me.Accounts {
		if err := v.addAccount(ctx, cl, me, aid); err != nil {
			return nil, nil, refused(err)
		}
	}
	return v, topics, nil
}

// addAccount adds the account's policy and users, where me may set and
// manage them.
func (v *view) addAccount(ctx context.Context, cl *api.Client, me *api.Me, aid string) error {
	if may(me, aid, policy.SetPolicy) {
		p, err := cl.Policy(ctx, aid)
		if err != nil && !withdrawn(err) {
			return err
		}
		if err == nil {
			v.Policies = append(v.Policies, *p)
		}
	}
	if !may(me, aid, policy.ManageUsers) {
		return nil
	}
	us, err := cl.Users(ctx, aid)
	if err != nil && !withdrawn(err) {
		return err
	}
	operator := slices.Contains(me.Operates, aid)
	for _, u := range us {
		self := strings.EqualFold(u.Email, me.User)
		v.Users = append(v.Users, userRow{AID: aid, Email: u.Email, Groups: strings.Join(u.Groups, ", "),
			Operator: u.Operator, Password: u.Password, Self: self, Removable: !self && (operator || !u.Operator)})
	}
	return nil
}

// withdrawn reports a refusal of what /v1/me said the user may do: the
// grant changed in between; the change wakes the page again.
func withdrawn(err error) bool { return api.IsCode(err, api.CodeForbidden) }

// grantsText says what the policies grant a user beyond their role, as
// "manage-users in rjwrn; read-audit in k2" ("" for none).
func grantsText(me *api.Me) string {
	var out []string
	for _, aid := range me.Accounts {
		if as := me.May[aid]; len(as) > 0 {
			out = append(out, strings.Join(as, ", ")+" in "+aid)
		}
	}
	return strings.Join(out, "; ")
}

// rowsOf are the devices joined to cid, not revoked ("" : every device).
func rowsOf(devs []api.DeviceDetail, cid string) []deviceRow {
	var out []deviceRow
	for _, d := range devs {
		row := deviceRow{ID: d.ID, User: d.User, Name: d.Name, OS: d.OS, Address: d.Address, State: d.State, Handshake: d.LastHandshake}
		var cids []string
		joined := false
		for _, m := range d.Clusters {
			cids = append(cids, m.CID)
			if m.CID == cid {
				joined, row.Handshake = true, m.LastHandshake
			}
		}
		row.Clusters = strings.Join(cids, ", ")
		if cid == "" || joined && d.State != api.DeviceRevoked {
			out = append(out, row)
		}
	}
	slices.SortStableFunc(out, func(a, b deviceRow) int { return strings.Compare(a.User+a.Name, b.User+b.Name) })
	return out
}

// refused turns the API's refusal of the session into errSignedOut.
func refused(err error) error {
	if api.IsCode(err, api.CodeUnauthorized) || api.IsCode(err, api.CodeSessionExpired) || api.IsCode(err, api.CodeDeviceRevoked) ||
		api.IsCode(err, api.CodeTokenRevoked) || api.IsCode(err, api.CodeTokenExpired) {
		return errSignedOut
	}
	return err
}
