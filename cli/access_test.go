package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/control/controltest"
	"github.com/runos/vpn/vpnd/localapi"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// realControlHarness is a harness whose operator verbs go to a real
// control (controltest), with the world file's operator token in
// RUNOS_TOKEN and `runos login` signing in ops@ through the login page.
func realControlHarness(t *testing.T) (*harness, *controltest.Control) {
	h := newHarness(t)
	ctl := controltest.Start(t)
	h.env["RUNOS_API_URL"] = ctl.URL
	h.env["RUNOS_CA_FILE"] = ctl.CAFile
	h.env["RUNOS_TOKEN"] = controltest.OperatorToken
	h.now = time.Now().UTC()
	h.signInOK = func(f *auth.Flow) (*auth.Token, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		o := &controltest.FormOpener{Ctx: ctx, Client: ctl.Client, User: "ops@rjwrn.example.com", Password: controltest.Password, Errc: make(chan error, 1)}
		f.Opener = o
		tok, err := f.SignInBrowser(ctx)
		if err == nil {
			err = <-o.Errc
		}
		return tok, err
	}
	return h, ctl
}

// laptop registers a device of email joined to cids, as a daemon would.
func laptop(t *testing.T, ctl *controltest.Control, email, name string, cids ...string) *api.Device {
	t.Helper()
	c := ctl.API(ctl.SignIn(t, email))
	ctx := context.Background()
	d, err := c.RegisterDevice(ctx, api.RegisterDeviceRequest{PublicKey: testKey(t), Name: name, OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	for _, cid := range cids {
		if _, err := c.JoinCluster(ctx, d.ID, cid); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestDevicesAndSessionsVerbs(t *testing.T) {
	h, ctl := realControlHarness(t)
	d := laptop(t, ctl, "dev@rjwrn.example.com", "dev-laptop", "ky3", "xym")

	r := h.run("devices", "list")
	r.want(t, 0, []string{"ID", "USER", "NAME", "STATE", "CLUSTERS", "HANDSHAKE", "LAST SEEN"}, nil)
	if !regexp.MustCompile(d.ID + `\s+dev@rjwrn.example.com\s+dev-laptop\s+linux\s+100.96.0.2\s+active\s+ky3,xym\s+never\s+\S+ ago`).MatchString(r.stdout) {
		t.Errorf("devices list:\n%s", r.stdout)
	}
	r = h.run("devices", "list", "--cid", "xym", "--json")
	var ds []api.DeviceDetail
	if err := json.Unmarshal([]byte(r.stdout), &ds); err != nil || len(ds) != 1 || ds[0].ID != d.ID || len(ds[0].Clusters) != 2 {
		t.Fatalf("--json: %v %s", err, r.stdout)
	}
	h.run("devices", "list", "--cid", "KY3").want(t, 2, nil, []string{"Run 'runos devices list --help' for usage."})
	h.run("devices", "list", "--user", "nobody@example.com").want(t, 0, []string{"No devices."}, nil)

	h.run("devices", "show", d.ID).want(t, 0, []string{
		"Device          " + d.ID + " (dev-laptop, linux)", "User            dev@rjwrn.example.com",
		"State           active: session ses-", "Clusters        ky3, last handshake never", "                xym, last handshake never"}, nil)
	h.run("devices", "show", "dev-nope").want(t, 1, nil, []string{"show device dev-nope: no device dev-nope among your account's devices"})

	// Sessions: listed, ended; the user's device drops.
	r = h.run("sessions", "list", "--user", "dev@rjwrn.example.com")
	r.want(t, 0, []string{"ID", "CLIENT", "SIGNED IN", "EXPIRES", "DEVICES", "runos-cli", d.ID}, nil)
	h.run("sessions", "list").want(t, 2, nil, []string{`required flag(s) "user" not set`})
	h.run("sessions", "revoke", "--user", "dev@rjwrn.example.com").want(t, 0, []string{
		"Ended 1 session of dev@rjwrn.example.com: ses-", "Devices " + d.ID + " dropped off every gateway."}, nil)
	h.run("sessions", "list", "--user", "dev@rjwrn.example.com").want(t, 0, []string{"dev@rjwrn.example.com has no live session."}, nil)
	h.run("sessions", "revoke", "--user", "dev@rjwrn.example.com").want(t, 1, nil, []string{"dev@rjwrn.example.com has no live session"})

	// Revoke and delete a device in use.
	d2 := laptop(t, ctl, "dev@rjwrn.example.com", "dev-desk", "ky3")
	h.run("devices", "delete", d2.ID).want(t, 1, nil, []string{"delete device " + d2.ID + ": device " + d2.ID + " is in use: its session is live until",
		"revoke it first: runos devices revoke " + d2.ID})
	h.run("devices", "revoke", d2.ID).want(t, 0, []string{
		"Revoked " + d2.ID + " (dev-desk of dev@rjwrn.example.com): its session ended and its key is refused.",
		"It left the VPN servers of ky3.", "Delete it to free its address 100.96.0.3: runos devices delete " + d2.ID}, nil)
	h.run("devices", "show", d2.ID).want(t, 0, []string{"State           revoked at", "by token world-file: its key is refused"}, nil)
	h.run("devices", "revoke", d2.ID).want(t, 1, nil, []string{"was already revoked"})
	h.run("devices", "delete", d2.ID).want(t, 0, []string{"Deleted device " + d2.ID + "; its address is free."}, nil)

	// The audit log has each of these once, newest first.
	h.run("audit", "--kind", "device").want(t, 0, []string{"TIME       ACTOR                  SOURCE     KIND               CID  TARGET",
		"token world-file       127.0.0.1  device.deleted     -    " + d2.ID + "  dev-desk (revoked, linux of dev@rjwrn.example.com): deleted, address 100.96.0.3 freed"}, nil)
	var page api.AuditPage
	if err := json.Unmarshal([]byte(h.run("audit", "--kind", "device", "--json").stdout), &page); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range page.Entries {
		kinds = append(kinds, e.Kind+":"+e.Target)
	}
	if got, want := strings.Join(kinds, " "), "device.deleted:"+d2.ID+" device.revoked:"+d2.ID+" device.joined:"+d2.ID+" device.registered:"+d2.ID+
		" device.joined:"+d.ID+" device.joined:"+d.ID+" device.registered:"+d.ID; got != want {
		t.Errorf("audit:\n%s\nwant\n%s", got, want)
	}
	r = h.run("audit", "--kind", "device", "--limit", "2")
	r.want(t, 0, []string{"device.deleted", "device.revoked", "Older entries: runos audit --before "}, nil)
	if !strings.Contains(r.stdout, " --kind device --limit 2\n") {
		t.Errorf("next page hint: %s", r.stdout)
	}
	h.run("audit", "--limit", "0").want(t, 2, nil, []string{"--limit 0: want 1 to 500"})
	h.run("audit", "--actor", "world-file", "--kind", "session.ended").want(t, 0, []string{"token world-file", "session.ended", "ended 1 session(s) of dev@rjwrn.example.com"}, nil)
}

func TestTokensVerbs(t *testing.T) {
	h, ctl := realControlHarness(t)
	// A token cannot make tokens.
	h.run("tokens", "create", "--name", "ci").want(t, 1, nil, []string{"create token ci: an operator token cannot create tokens", "runos login"})
	h.run("tokens", "create", "--name", "ci", "--expires", "2y").want(t, 2, nil, []string{`--expires "2y": want a duration such as 90d, 2w or 12h`})
	h.run("tokens", "create", "--name", "ci", "--expires", "400d").want(t, 2, nil, []string{"--expires 400d: at most 366 days"})

	delete(h.env, "RUNOS_TOKEN")
	h.run("login").want(t, 0, []string{"Logged in to " + ctl.URL + " as ops@rjwrn.example.com"}, nil)
	r := h.run("tokens", "create", "--name", "ci", "--expires", "30d")
	r.want(t, 0, []string{"Created token ci (tok-", "for account rjwrn, expires", "Its secret, shown only now"}, nil)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	secret := lines[len(lines)-1]
	if len(secret) != 43 {
		t.Fatalf("secret %q", secret)
	}
	r = h.run("tokens", "list")
	r.want(t, 0, []string{"ID", "NAME", "STATE", "CREATED", "EXPIRES", "LAST USED", "world-file", "ci", "active", "never"}, nil)
	if strings.Contains(r.stdout, secret) {
		t.Fatal("the list shows the secret")
	}
	var ks []api.APIToken
	if err := json.Unmarshal([]byte(h.run("tokens", "list", "--json").stdout), &ks); err != nil || len(ks) != 2 || ks[1].Name != "ci" {
		t.Fatalf("tokens --json: %v %+v", err, ks)
	}

	// The new token works; revoked, it is refused with a clear message.
	h.env["RUNOS_TOKEN"] = secret
	h.run("clusters", "list").want(t, 0, []string{"ky3"}, nil)
	delete(h.env, "RUNOS_TOKEN")
	h.run("tokens", "revoke", "ci").want(t, 0, []string{"Revoked token ci (tok-"}, nil)
	h.env["RUNOS_TOKEN"] = secret
	h.run("clusters", "list").want(t, 1, nil, []string{`list clusters: the operator token "ci" was revoked at`, "by ops@rjwrn.example.com",
		"an operator creates a new one with `runos tokens create --name ci`"})
	delete(h.env, "RUNOS_TOKEN")
	h.run("tokens", "revoke", "nope").want(t, 1, nil, []string{"revoke token nope: no token nope in account rjwrn (list them: runos tokens list)"})
	r = h.run("audit", "--kind", "token")
	r.want(t, 0, []string{"ops@rjwrn.example.com", "token.revoked", "token.created"}, nil)
}

func TestVPNDevicesVerbs(t *testing.T) {
	h := newHarness(t)
	now := h.now
	h.daemon.st.Session = localapi.Session{State: localapi.SessionSignedIn, User: "alice@example.com", DeviceID: "dev-1", ExpiresAt: now.Add(time.Hour)}
	h.daemon.devices = []api.DeviceDetail{
		{Device: api.Device{ID: "dev-1", Name: "laptop", OS: "linux", Address: "100.96.0.2"}, State: api.DeviceActive, LastSeen: now.Add(-time.Minute),
			Clusters: []api.DeviceCluster{{CID: "ky3", LastHandshake: now.Add(-10 * time.Second)}}, LastHandshake: now.Add(-10 * time.Second)},
		{Device: api.Device{ID: "dev-2", Name: "old", OS: "darwin", Address: "100.96.0.3"}, State: api.DeviceSignedOut, LastSeen: now.Add(-50 * time.Hour)},
	}
	r := h.run("vpn", "devices")
	r.want(t, 0, []string{"ID     NAME                  OS      ADDRESS     STATE       CLUSTERS  HANDSHAKE  LAST SEEN",
		"dev-1  laptop (this device)  linux   100.96.0.2  active      ky3       10s ago    1m ago",
		"dev-2  old                   darwin  100.96.0.3  signed-out  -         never      2d2h ago"}, nil)
	h.run("vpn", "devices", "remove", "dev-2").want(t, 0, []string{"Removed device dev-2: its session ended, its key is refused and its address is free."}, nil)
	h.run("vpn", "devices", "remove", "dev-1").want(t, 0, []string{"Removed this device (dev-1): it is signed out as revoked; `runos vpn up` signs in again with a fresh key."}, nil)
	h.run("vpn", "devices", "remove").want(t, 2, nil, []string{"missing ID"})
}

func testKey(t *testing.T) string {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey().String()
}
