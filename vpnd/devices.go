package vpnd

import (
	"context"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// A user's own devices, asked of control with the session the daemon
// holds: `runos vpn devices` and `runos vpn devices remove ID` need no
// other sign-in than `runos vpn up`.

func (d *daemon) myDevices(ctx context.Context) ([]api.DeviceDetail, *apiError) {
	s, _, aerr := d.signedIn()
	if aerr != nil {
		return nil, aerr
	}
	ds, err := s.ctl.MyDevices(ctx)
	if err != nil {
		return nil, d.controlRefusal(s, "list your devices", err)
	}
	if ds == nil {
		ds = []api.DeviceDetail{}
	}
	return ds, nil
}

func (d *daemon) removeDevice(ctx context.Context, id string) (localapi.Status, *apiError) {
	s, self, aerr := d.signedIn()
	if aerr != nil {
		return localapi.Status{}, aerr
	}
	if err := s.ctl.RemoveMyDevice(ctx, id); err != nil {
		return localapi.Status{}, d.controlRefusal(s, "remove device "+id, err)
	}
	d.log.Info("device removed on control", "device", id, "this", id == self)
	// Removing this device revokes the session: the long-poll answers
	// device_revoked within moments and the status follows.
	return d.Status(), nil
}
