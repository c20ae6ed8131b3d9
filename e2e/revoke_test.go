//go:build !windows

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/control/controltest"
	"github.com/runos/vpn/vpnd/localapi"
)

// signIn signs the lab's user in through control's login page as the CLI
// does (PKCE, a loopback redirect to this process) and returns the access
// token; the browser's connections to control start on the first laptop.
func (w *world) signIn() string {
	w.t.Helper()
	hc, err := w.lab.HTTPClient(w.env.Client.Host)
	if err != nil {
		w.t.Fatal(err)
	}
	tr := hc.Transport.(*http.Transport)
	labDial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "127.0.0.1:") { // the loopback listener of the sign-in, here
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		return labDial(ctx, network, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := &controltest.FormOpener{Ctx: ctx, Client: hc, User: w.env.User, Password: w.env.Password, Errc: make(chan error, 1)}
	flow := &auth.Flow{Issuer: w.env.APIURL, ClientID: api.ClientCLI, HTTPClient: hc, Opener: o, Out: io.Discard}
	tok, err := flow.SignInBrowser(ctx)
	if err == nil {
		err = <-o.Errc
	}
	if err != nil {
		w.t.Fatalf("sign in: %v", err)
	}
	return tok.AccessToken
}

// operator is control's API from the laptop's network with the lab's
// operator token (the world file's).
func (w *world) operator() *api.Client {
	w.t.Helper()
	c, err := w.lab.APIClient(w.env.Client.Host, w.env.OperatorToken)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// auditSince is the account's audit log after entry id after, oldest first.
func (w *world) auditSince(after int64) []api.AuditEntry {
	w.t.Helper()
	p, err := w.operator().Audit(context.Background(), api.AuditQuery{Limit: 500})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []api.AuditEntry
	for _, e := range p.Entries {
		if e.ID > after {
			out = append(out, e)
		}
	}
	slices.Reverse(out)
	return out
}

func (w *world) lastAuditID() int64 {
	w.t.Helper()
	p, err := w.operator().Audit(context.Background(), api.AuditQuery{Limit: 1})
	if err != nil {
		w.t.Fatal(err)
	}
	if len(p.Entries) == 0 {
		return 0
	}
	return p.Entries[0].ID
}

// kinds is "kind target" of each entry.
func kinds(es []api.AuditEntry) []string {
	var out []string
	for _, e := range es {
		s := e.Kind
		if e.CID != "" {
			s += " " + e.CID
		}
		out = append(out, s)
	}
	return out
}

// TestRevokeDevice: a laptop connected to ky3 and xym; an operator revokes
// it with the CLI; within a second both gateways no longer list its key
// (stock wg), the laptop's status says revoked, its resolv.conf is back to
// the original; `runos vpn up` signs in again and registers a new key; each
// change leaves exactly one audit entry.
func TestRevokeDevice(t *testing.T) {
	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host
	resolv := filepath.Join(w.env.Dir, "hosts", laptop, "resolv.conf")
	original, err := os.ReadFile(resolv)
	if err != nil {
		t.Fatal(err)
	}
	start := w.lastAuditID()
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.must(laptop, nil, "runos", "vpn", "connect", "xym")
	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3 and xym", upOn("", "ky3", "xym"))
	oldKey, dev := st.Tunnel.PublicKey, st.Session.DeviceID
	for _, h := range []string{"ky3-n1", "xym-n1"} {
		if !strings.Contains(w.gatewayPeers(h), oldKey) {
			t.Fatalf("%s does not list the laptop", h)
		}
	}
	if b, _ := os.ReadFile(resolv); string(b) == string(original) {
		t.Fatal("split DNS did not change the laptop's resolv.conf")
	}
	// The operator sees it with its handshakes.
	w.waitFor(15*time.Second, "handshakes recorded for both clusters", func() bool {
		d, err := w.operator().Device(context.Background(), dev)
		return err == nil && len(d.Clusters) == 2 && !d.Clusters[0].LastHandshake.IsZero() && !d.Clusters[1].LastHandshake.IsZero()
	})
	w.must(laptop, []string{"RUNOS_TOKEN=" + w.env.OperatorToken}, "runos", "devices", "list", "--cid", "xym")

	// Revoke, and time both gateways' peers from the revoke's commit.
	before := time.Now()
	out := w.must(laptop, []string{"RUNOS_TOKEN=" + w.env.OperatorToken}, "runos", "devices", "revoke", dev)
	if !strings.Contains(out, "Revoked "+dev) || !strings.Contains(out, "It left the VPN servers of ky3, xym.") {
		t.Errorf("revoke said:\n%s", out)
	}
	var gone [2]time.Time
	for !(gone[0].After(before) && gone[1].After(before)) {
		for i, h := range []string{"ky3-n1", "xym-n1"} {
			if gone[i].IsZero() && !strings.Contains(w.gatewayPeers(h), oldKey) {
				gone[i] = time.Now()
			}
		}
		if time.Since(before) > 10*time.Second {
			t.Fatalf("the gateways still list the revoked key after 10 s: %v", gone)
		}
	}
	es := w.auditSince(start)
	revokedAt := es[len(es)-1].At
	if es[len(es)-1].Kind != "device.revoked" {
		t.Fatalf("last entry %+v", es[len(es)-1])
	}
	last := gone[0]
	if gone[1].After(last) {
		last = gone[1]
	}
	took := last.Sub(revokedAt)
	t.Logf("revoke committed → both gateways without the key (stock wg, polled): %s; the CLI command to that: %s", took, last.Sub(before))
	if took > time.Second {
		t.Errorf("the gateways dropped the key %s after the revoke, want within a second", took)
	}

	// The laptop: revoked, with when and what to run; DNS and routes restored.
	st = w.waitStatus(laptop, 10*time.Second, "revoked", func(s *localapi.Status) bool { return s.Session.State == localapi.SessionRevoked })
	if st.Session.RevokedAt.IsZero() || st.Tunnel.PublicKey == oldKey && st.Tunnel.PublicKey != "" {
		t.Errorf("revoked status: %+v tunnel %+v", st.Session, st.Tunnel)
	}
	human := w.stdout(laptop, nil, "runos", "vpn", "status")
	if !strings.Contains(human, "revoked at ") || !strings.Contains(human, "run `runos vpn up` to sign in again with a fresh key") {
		t.Errorf("vpn status:\n%s", human)
	}
	w.waitFor(5*time.Second, "resolv.conf restored", func() bool {
		b, _ := os.ReadFile(resolv)
		return string(b) == string(original)
	})
	if out := w.must(laptop, nil, "ip", "route", "show", "dev", "wg1"); strings.Contains(out, "100.100.") {
		t.Errorf("routes to the clusters left on wg1:\n%s", out)
	}
	if out := w.must(laptop, nil, "wg", "show", "wg1", "peers"); strings.TrimSpace(out) != "" {
		t.Errorf("peers left on wg1: %q", out)
	}
	// Connecting is refused with the next step.
	if out, err := w.run(laptop, nil, "runos", "vpn", "connect", "ky3"); err == nil || !strings.Contains(out, "runos vpn up") {
		t.Errorf("connect while revoked: %v\n%s", err, out)
	}

	// Sign in again: a new key, a new device, both clusters back.
	launchesBefore := w.browserLaunches(laptop)
	w.must(laptop, nil, "runos", "vpn", "up")
	if w.browserLaunches(laptop) != launchesBefore+1 {
		t.Error("vpn up after the revoke did not sign in through the browser")
	}
	st = w.waitStatus(laptop, 30*time.Second, "back on ky3 and xym", upOn("", "ky3", "xym"))
	if st.Tunnel.PublicKey == oldKey || st.Session.DeviceID == dev {
		t.Errorf("same key or device after signing in again: %s %s", st.Tunnel.PublicKey, st.Session.DeviceID)
	}
	for _, h := range []string{"ky3-n1", "xym-n1"} {
		if peers := w.gatewayPeers(h); !strings.Contains(peers, st.Tunnel.PublicKey) || strings.Contains(peers, oldKey) {
			t.Errorf("%s peers:\n%s", h, peers)
		}
	}
	// Every change, one entry each.
	got := kinds(w.auditSince(start))
	want := []string{"session.signed_in", "device.registered", "device.joined ky3", "device.joined xym", "device.revoked",
		"session.signed_in", "device.registered", "device.joined", "device.joined"}
	slices.Sort(got[7:])
	if fmt.Sprint(got[:7]) != fmt.Sprint(want[:7]) || len(got) != 9 || !strings.HasPrefix(got[7], "device.joined") || !strings.HasPrefix(got[8], "device.joined") {
		t.Errorf("audit entries:\n%q\nwant\n%q", got, want)
	}
}

// TestDeviceLimit: a user with 20 devices is refused the 21st with the
// limit and how to remove one; removing one with `runos vpn devices
// remove` lets the new machine in.
func TestDeviceLimit(t *testing.T) {
	w := newWorld(t, 2, 0)
	a, b := w.env.Clients[0].Host, w.env.Clients[1].Host
	w.must(a, nil, "runos", "vpn", "up", "--cid", "ky3")
	// The same user registers 19 more keys (machines long gone), signed in
	// once more for them.
	user, err := w.lab.APIClient(a, w.signIn())
	if err != nil {
		t.Fatal(err)
	}
	var spare string
	for i := range 19 {
		k, _ := wgtypes.GeneratePrivateKey()
		d, err := user.RegisterDevice(context.Background(), api.RegisterDeviceRequest{PublicKey: k.PublicKey().String(), Name: fmt.Sprintf("old-%d", i), OS: "linux"})
		if err != nil {
			t.Fatalf("device %d: %v", i+2, err)
		}
		spare = d.ID
	}
	// (Those 19 shared one session: removing one signs out the others, not laptop a.)
	// The 21st: laptop b is refused, saying why and what to do.
	out, err := w.run(b, nil, "runos", "vpn", "up", "--cid", "ky3")
	if err == nil || !strings.Contains(out, w.env.User+" has 20 devices, the most one user may have (runos-control --max-devices-per-user 20)") ||
		!strings.Contains(out, "remove one you no longer use: list them with `runos vpn devices`, then `runos vpn devices remove ID`") {
		t.Fatalf("the 21st device: %v\n%s", err, out)
	}
	list := w.must(a, nil, "runos", "vpn", "devices")
	if strings.Count(list, "\n") != 21 || !strings.Contains(list, "(this device)") {
		t.Errorf("vpn devices:\n%s", list)
	}
	w.must(a, nil, "runos", "vpn", "devices", "remove", spare)
	w.must(b, nil, "runos", "vpn", "up", "--cid", "ky3")
	w.waitStatus(b, 30*time.Second, "b connected", upOn("", "ky3"))
	if st := w.status(a); st.Session.State != localapi.SessionSignedIn {
		t.Errorf("laptop a after removing another device: %+v", st.Session)
	}
}
