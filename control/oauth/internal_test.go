package oauth

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/reqid"
	"github.com/runos/vpn/internal/syncbuf"
)

// brokenStore fails every call with a text no caller may see.
type brokenStore struct{ GrantStore }

var errDisk = errors.New("disk I/O error at /var/lib/runos-control/control.db-wal")

func (brokenStore) TakeAuthCode(context.Context, string) (AuthCode, error) {
	return AuthCode{}, errDisk
}
func (brokenStore) PutDeviceCode(context.Context, DeviceCode, time.Time, int) error { return errDisk }

// TestInternalErrorsShowOnlyARequestID: the sign-in endpoints, open to
// anyone, answer a failure inside control with a request id alone; the log
// holds the failure under that id.
func TestInternalErrorsShowOnlyARequestID(t *testing.T) {
	var logs syncbuf.Buffer
	h := newHarness(t, func(c *Config) {
		c.Store = brokenStore{c.Store}
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	check := func(what string, status int, id, body string) {
		t.Helper()
		if status != 500 || id == "" || !strings.Contains(body, "request "+id) {
			t.Errorf("%s: %d %q, want 500 naming the request id %q", what, status, body, id)
		}
		if strings.Contains(body, "disk") || strings.Contains(body, "/var/lib") {
			t.Errorf("%s: the answer tells the internal error: %s", what, body)
		}
		if l := logs.String(); !strings.Contains(l, "requestId="+id) || !strings.Contains(l, "disk I/O error") {
			t.Errorf("%s: the log lacks request %s with the error:\n%s", what, id, l)
		}
	}
	a := h.tokenRequest(url.Values{"grant_type": {"authorization_code"}, "client_id": {api.ClientCLI}, "code": {"some-code"},
		"redirect_uri": {h.redirect}, "code_verifier": {strings.Repeat("v", 43)}})
	desc, _ := a.body["error_description"].(string)
	check("token", a.status, a.header.Get(reqid.Header), a.errCode()+" "+desc)
	a = h.rawPost(api.PathDeviceCode, "application/x-www-form-urlencoded", url.Values{"client_id": {api.ClientCLI}}.Encode())
	desc, _ = a.body["error_description"].(string)
	check("device code", a.status, a.header.Get(reqid.Header), a.errCode()+" "+desc)
}
