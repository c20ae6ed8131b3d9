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
	Operator bool
	Accounts string
	CSRF     string
	Since    uint64 // the hub's version the view was read at (the live stream's start)

	Clusters []clusterView
	Mine     []deviceRow // a user who is no operator: their own devices
	Audit    []api.AuditEntry
	Policies []api.Policy // operators: each account's access policy they may edit
	Users    []userRow    // operators: each operated account's users
}

type userRow struct {
	AID, Email, Groups string
	Operator, Password bool
	Self               bool // the signed-in operator: no Remove button
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
	v := &view{User: me.User, Operator: me.Operator, Accounts: strings.Join(me.Accounts, ", "), CSRF: csrfToken(cl.Token), Since: since}
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
		return v, topics, nil
	}
	page, err := cl.Audit(ctx, api.AuditQuery{Limit: auditShown})
	if err != nil {
		return nil, nil, refused(err)
	}
	v.Audit = page.Entries
	for _, aid := range me.Accounts {
		p, err := cl.Policy(ctx, aid)
		if api.IsCode(err, api.CodeForbidden) {
			continue // a member of the account, not its operator
		}
		if err != nil {
			return nil, nil, refused(err)
		}
		v.Policies = append(v.Policies, *p)
		us, err := cl.Users(ctx, aid)
		if err != nil {
			return nil, nil, refused(err)
		}
		for _, u := range us {
			v.Users = append(v.Users, userRow{AID: aid, Email: u.Email, Groups: strings.Join(u.Groups, ", "),
				Operator: u.Operator, Password: u.Password, Self: strings.EqualFold(u.Email, me.User)})
		}
	}
	return v, topics, nil
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
