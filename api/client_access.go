package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// Devices lists the devices of the operator's account.
func (c *Client) Devices(ctx context.Context, q DeviceQuery) ([]DeviceDetail, error) {
	var ds []DeviceDetail
	return ds, c.Do(ctx, http.MethodGet, "/v1/devices"+query("aid", q.AID, "cid", q.CID, "user", q.User), nil, &ds)
}

// Device shows one device (an operator's, or the caller's own).
func (c *Client) Device(ctx context.Context, id string) (*DeviceDetail, error) {
	var d DeviceDetail
	return &d, c.Do(ctx, http.MethodGet, "/v1/devices/"+esc(id), nil, &d)
}

// RevokeDevice ends the device's session and refuses its key from then on.
func (c *Client) RevokeDevice(ctx context.Context, id string) (*DeviceDetail, error) {
	var d DeviceDetail
	return &d, c.Do(ctx, http.MethodPost, "/v1/devices/"+esc(id)+"/revoke", nil, &d)
}

// DeleteDevice deletes a revoked or signed-out device, freeing its address.
func (c *Client) DeleteDevice(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/devices/"+esc(id), nil, nil)
}

// MyDevices lists the caller's own devices.
func (c *Client) MyDevices(ctx context.Context) ([]DeviceDetail, error) {
	var ds []DeviceDetail
	return ds, c.Do(ctx, http.MethodGet, "/v1/me/devices", nil, &ds)
}

// RemoveMyDevice revokes and deletes one of the caller's own devices.
func (c *Client) RemoveMyDevice(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/me/devices/"+esc(id), nil, nil)
}

// Sessions lists a user's live sessions.
func (c *Client) Sessions(ctx context.Context, aid, user string) ([]Session, error) {
	var ss []Session
	return ss, c.Do(ctx, http.MethodGet, "/v1/sessions"+query("aid", aid, "user", user), nil, &ss)
}

// EndUserSession ends one session of a user (an operator's verb).
func (c *Client) EndUserSession(ctx context.Context, id string) (*EndedSessions, error) {
	var e EndedSessions
	return &e, c.Do(ctx, http.MethodDelete, "/v1/sessions/"+esc(id), nil, &e)
}

// EndUserSessions ends every live session of a user.
func (c *Client) EndUserSessions(ctx context.Context, aid, user string) (*EndedSessions, error) {
	var e EndedSessions
	return &e, c.Do(ctx, http.MethodDelete, "/v1/sessions"+query("aid", aid, "user", user), nil, &e)
}

// CreateToken creates an operator API token; the answer holds its secret,
// shown this once.
func (c *Client) CreateToken(ctx context.Context, r CreateTokenRequest) (*CreatedToken, error) {
	var t CreatedToken
	return &t, c.Do(ctx, http.MethodPost, "/v1/tokens", r, &t)
}

// Tokens lists the account's operator tokens.
func (c *Client) Tokens(ctx context.Context, aid string) ([]APIToken, error) {
	var ts []APIToken
	return ts, c.Do(ctx, http.MethodGet, "/v1/tokens"+query("aid", aid), nil, &ts)
}

// RevokeToken revokes a token by id or name.
func (c *Client) RevokeToken(ctx context.Context, aid, idOrName string) (*APIToken, error) {
	var t APIToken
	return &t, c.Do(ctx, http.MethodDelete, "/v1/tokens/"+esc(idOrName)+query("aid", aid), nil, &t)
}

// Audit lists audit entries, newest first.
func (c *Client) Audit(ctx context.Context, q AuditQuery) (*AuditPage, error) {
	var p AuditPage
	lim, before := "", ""
	if q.Limit > 0 {
		lim = strconv.Itoa(q.Limit)
	}
	if q.Before > 0 {
		before = strconv.FormatInt(q.Before, 10)
	}
	return &p, c.Do(ctx, http.MethodGet, "/v1/audit"+query("aid", q.AID, "cid", q.CID, "actor", q.Actor, "kind", q.Kind,
		"limit", lim, "before", before), nil, &p)
}
