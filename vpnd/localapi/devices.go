package localapi

import (
	"context"
	"net/http"
	"net/url"

	"github.com/runos/vpn/api"
)

// Devices lists the signed-in user's devices, as control knows them
// (`runos vpn devices`). Status.Session.DeviceID is this one.
func (c *Client) Devices(ctx context.Context) ([]api.DeviceDetail, error) {
	var ds []api.DeviceDetail
	return ds, c.do(ctx, http.MethodGet, "/v1/devices", nil, &ds)
}

// RemoveDevice removes one of the user's devices on control: it is
// revoked (its session ends, its key is refused) and deleted. Removing this
// device signs it out as revoked.
func (c *Client) RemoveDevice(ctx context.Context, id string) (*Status, error) {
	var s Status
	return &s, c.do(ctx, http.MethodDelete, "/v1/devices/"+url.PathEscape(id), nil, &s)
}
