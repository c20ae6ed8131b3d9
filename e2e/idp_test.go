//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runos/vpn/internal/chromiumtest"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/syncbuf"
	"github.com/runos/vpn/lab"
	"github.com/runos/vpn/vpnd/localapi"
)

// idpCheckEvery is control's --oidc-check-interval in these tests (15
// minutes in production): how soon a user removed at the provider loses
// their sessions.
const idpCheckEvery = 2 * time.Second

// idpUser is the lab's identity-provider user in group g.
func (w *world) idpUser(g string) lab.EnvUser {
	w.t.Helper()
	for _, u := range w.env.Users {
		if u.SignIn == lab.SignInOIDC && len(u.Groups) == 1 && u.Groups[0] == g {
			return u
		}
	}
	w.t.Fatalf("env.json lists no provider user in group %s: %+v", g, w.env.Users)
	return lab.EnvUser{}
}

// TestIdPGroupsOnTwoLaptops: the lab's own OpenID Connect provider signs
// two users in, on two laptops, each into the groups it says. dev signs in
// through the provider's login page in Chromium, oncall with the device
// code (the scripted browser at the provider's page). Under a policy that
// lets oncall reach everything and dev only ky3's web Service, each
// reaches what its group allows and nothing else, at the same time; dev's
// `runos vpn connect xym` gets the clear error. Removed at the provider,
// dev is signed out within the (shortened) check interval while oncall
// stays connected. The one-user rules themselves are TestPolicy*'s.
func TestIdPGroupsOnTwoLaptops(t *testing.T) {
	netnstest.Require(t, "chromium", "nsenter")
	w := newWorldWith(t, lab.Options{Clients: 2, ControlFlags: []string{"--oidc-check-interval", idpCheckEvery.String()}})
	if w.env.OIDC == nil || !strings.HasPrefix(w.env.OIDC.Issuer, "https://") || len(w.env.Users) < 3 || w.env.Users[0].Email != w.env.User {
		t.Fatalf("env.json: oidc %+v, users %+v", w.env.OIDC, w.env.Users)
	}
	dev, oncall := w.idpUser(lab.GroupDev), w.idpUser(lab.GroupOncall)
	devLaptop, oncallLaptop := w.env.Clients[0].Host, w.env.Clients[1].Host
	op := []string{"RUNOS_TOKEN=" + w.env.OperatorToken}
	ky3, _ := w.env.Cluster("ky3")
	svc := ky3.Services[0]
	for _, g := range []string{lab.GroupDev, lab.GroupOncall} {
		w.must(devLaptop, op, "runos", "groups", "create", g)
	}
	file := filepath.Join(w.env.Dir, "policy.txt")
	doc := fmt.Sprintf("version 1\nallow group:%s -> ky3: *\nallow group:%s -> xym: *\nallow group:%s -> ky3: %s:80\n",
		lab.GroupOncall, lab.GroupOncall, lab.GroupDev, svc.ClusterIP)
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	w.must(devLaptop, op, "runos", "policy", "set", file)

	w.signInWithChromiumAtProvider(t, devLaptop, dev)
	w.signInWithDeviceCodeAtProvider(t, oncallLaptop, oncall)
	w.must(oncallLaptop, nil, "runos", "vpn", "connect", "xym")
	w.waitStatus(oncallLaptop, 30*time.Second, "connected to ky3 and xym", upOn("", "ky3", "xym"))

	out, err := w.run(devLaptop, nil, "runos", "vpn", "connect", "xym")
	t.Logf("%s$ runos vpn connect xym (refused)\n%s", devLaptop, out)
	if err == nil || !strings.Contains(out, "connect xym: the access policy of account") ||
		!strings.Contains(out, "does not let "+dev.Email+" (in group(s) "+lab.GroupDev+") connect to xym") {
		t.Errorf("dev's connect xym: %v\n%s", err, out)
	}

	// Both at once: what each group allows works, the rest is refused.
	devSt, oncallSt := w.status(devLaptop), w.status(oncallLaptop)
	devKy3, _ := cluster(devSt, "ky3")
	oncallKy3, _ := cluster(oncallSt, "ky3")
	oncallXym, _ := cluster(oncallSt, "xym")
	probes := []struct {
		laptop, url, want string
		allowed           bool
	}{
		{devLaptop, "http://" + svc.ClusterIP + "/", svc.Body, true},
		{oncallLaptop, "http://" + svc.ClusterIP + "/", svc.Body, true},
		{oncallLaptop, "http://" + oncallKy3.Server.Address + "/", lab.WebAppBody("ky3", "n1"), true},
		{oncallLaptop, "http://" + svc.PodIP + ":8080/", svc.Body, true},
		{oncallLaptop, "http://" + oncallXym.Server.Address + "/", lab.WebAppBody("xym", "n1"), true},
		{devLaptop, "http://" + devKy3.Server.Address + "/", "", false},
		{devLaptop, "http://" + svc.PodIP + ":8080/", "", false},
		{devLaptop, "http://" + ky3.Nodes[1].InternalIP + "/", "", false},
	}
	for _, p := range probes {
		body, err := w.run(p.laptop, nil, "curl", "-sS", "--max-time", "2", p.url)
		switch {
		case p.allowed && (err != nil || !strings.Contains(body, p.want)):
			t.Errorf("%s: GET %s = %q, %v; want %q", p.laptop, p.url, body, err, p.want)
		case !p.allowed && err == nil:
			t.Errorf("%s: GET %s answered %q; want it refused", p.laptop, p.url, body)
		}
	}

	// dev removed at the provider: signed out at control's next check.
	at := time.Now()
	if err := lab.IdPAdmin(t.Context(), w.env, "remove", dev.Email); err != nil {
		t.Fatal(err)
	}
	st := w.waitStatus(devLaptop, idpCheckEvery+20*time.Second, "signed out", func(s *localapi.Status) bool {
		c, _ := cluster(s, "ky3")
		return s.Session.State != localapi.SessionSignedIn && c.State != localapi.ClusterConnected
	})
	t.Logf("removed at the provider → %s signed out after %v (check interval %v): session %+v",
		devLaptop, time.Since(at).Round(time.Millisecond), idpCheckEvery, st.Session)
	if _, err := w.run(devLaptop, nil, "curl", "-sS", "--max-time", "2", "http://"+svc.ClusterIP+"/"); err == nil {
		t.Error("the removed user still reaches ky3's Service")
	}
	w.waitStatus(oncallLaptop, 5*time.Second, "still connected to ky3 and xym", upOn("", "ky3", "xym"))
	if body, err := w.run(oncallLaptop, nil, "curl", "-sS", "--max-time", "2", "http://"+svc.ClusterIP+"/"); err != nil || !strings.Contains(body, svc.Body) {
		t.Errorf("oncall after dev's removal: %q, %v", body, err)
	}
}

// signInWithChromiumAtProvider: `runos vpn up --cid ky3` on a laptop, its
// sign-in in a headless Chromium there: control's login page, "Sign in
// with …", the provider's login page typed into and submitted, and the
// redirects back through control to the CLI's loopback listener.
func (w *world) signInWithChromiumAtProvider(t *testing.T, laptop string, u lab.EnvUser) {
	t.Helper()
	bctx := w.chromium(t, laptop, w.env.OIDC.CertFile)
	authorize, up := w.upWithBrowserHandover(t, laptop, nil, "ky3")
	var err error // the first step that failed: the later ones are not taken
	step := func(what string, a chromedp.Action[chromedp.Void]) {
		if err == nil {
			if err = chromedp.Do(bctx, a); err != nil {
				err = fmt.Errorf("%s: %w", what, err)
			}
		}
	}
	step("load control's login page", chromiumtest.Navigate(authorize))
	step("press Sign in with the provider", chromedp.Click(chromedp.CSS(`button[value="upstream"]`)))
	step("reach the provider's login page", chromedp.WaitVisible(chromedp.ID("submit")))
	var at string
	if err == nil {
		if at, err = chromedp.Run(bctx, chromedp.Location()); err == nil && !strings.HasPrefix(at, w.env.OIDC.Issuer+"/login/") {
			err = fmt.Errorf("the provider's login page is at %s, not under %s", at, w.env.OIDC.Issuer)
		}
	}
	step("type the email", chromedp.SendKeys(chromedp.ID("username"), u.Email))
	step("type the password", chromedp.SendKeys(chromedp.ID("password"), u.Password))
	step("press Sign in at the provider", chromedp.Click(chromedp.ID("submit")))
	final, err := waitLoopback(bctx, err)
	w.checkLoopbackPage(bctx, final, err)
	r := <-up
	if r.err != nil || !strings.Contains(r.out, "Signed in as "+u.Email) || !strings.Contains(r.out, "ky3 is up") {
		t.Fatalf("runos vpn up through the provider in Chromium: %v\n%s", r.err, r.out)
	}
	w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("", "ky3"))
}

// signInWithDeviceCodeAtProvider: `runos vpn up --cid ky3` with no browser
// prints a device code; the laptop's scripted browser enters it as u,
// through the provider's login page.
func (w *world) signInWithDeviceCodeAtProvider(t *testing.T, laptop string, u lab.EnvUser) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out syncbuf.Buffer
	wait := w.startOn(ctx, laptop, []string{"BROWSER=", "DISPLAY=", "WAYLAND_DISPLAY=", "SSH_CONNECTION=203.0.113.9 50000 10.0.0.2 22"}, nil, &out,
		"runos", "vpn", "up", "--cid", "ky3")
	var m []string
	w.waitFor(time.Minute, "the device code printed", func() bool { m = deviceLine.FindStringSubmatch(out.String()); return m != nil })
	w.must(laptop, []string{lab.BrowserUserEnv + "=" + u.Email}, "sh", "-c", `exec "$BROWSER" "$1"`, "approve", m[1]+"?user_code="+m[2])
	if err := wait(); err != nil || !strings.Contains(out.String(), "Signed in as "+u.Email) {
		t.Fatalf("runos vpn up with the device code through the provider: %v\n%s", err, out.String())
	}
	w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("", "ky3"))
}

// BenchmarkSignInThroughProvider: `runos vpn up --cid ky3` from a signed
// out laptop until the daemon reports ky3 connected with a live
// handshake, signing in through the lab's identity provider (dev, on one
// laptop) and with control's own password form (the operator, on the
// other), in alternated rounds: the same scripted browser, the same
// command; the provider adds its redirects, its login page and control's
// code exchange with it, control's form its bcrypt comparison (cost 12;
// the lab's provider compares its passwords in clear).
func BenchmarkSignInThroughProvider(b *testing.B) {
	w := newWorld(b, 2, 0)
	dev := w.idpUser(lab.GroupDev)
	pwLaptop, idpLaptop := w.env.Clients[0].Host, w.env.Clients[1].Host
	round := func(laptop string, extra []string, who, via string) time.Duration {
		start := time.Now()
		out, err := w.run(laptop, extra, "runos", "vpn", "up", "--cid", "ky3")
		if err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(out, "Signed in as "+who) || !strings.Contains(out, via) {
			b.Fatalf("runos vpn up did not sign %s in %q:\n%s", who, via, out)
		}
		w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("", "ky3"))
		d := time.Since(start)
		w.must(laptop, nil, "runos", "vpn", "down")
		w.waitStatus(laptop, 10*time.Second, "signed out", func(s *localapi.Status) bool { return s.Session.State != localapi.SessionSignedIn })
		return d
	}
	n := max(b.N, 5)
	var pw, idp []time.Duration
	b.ResetTimer()
	for range n {
		pw = append(pw, round(pwLaptop, nil, w.env.User, "filling the login form"))
		idp = append(idp, round(idpLaptop, []string{lab.BrowserUserEnv + "=" + dev.Email}, dev.Email, "through the identity provider"))
	}
	b.StopTimer()
	reportDurations(b, "password-up", pw)
	reportDurations(b, "provider-up", idp)
}
