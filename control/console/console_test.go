package console_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/controltest"
)

// browser is a scripted browser with its own cookies, which signs in to
// the console through the real login page.
type browser struct {
	t   *testing.T
	ctl *controltest.Control
	hc  *http.Client
}

func newBrowser(t *testing.T, ctl *controltest.Control) *browser {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Transport: ctl.Client.Transport, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{t: t, ctl: ctl, hc: hc}
}

type answer struct {
	status int
	loc    string
	body   string
}

func (b *browser) do(method, path string, form url.Values, hdr map[string]string) answer {
	b.t.Helper()
	u := path
	if strings.HasPrefix(path, "/") {
		u = b.ctl.URL + path
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.ctl.URL)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	bb, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Location"), string(bb)}
}

// signIn goes to /console and through the login form as email.
func (b *browser) signIn(email string) answer {
	b.t.Helper()
	a := b.do("GET", "/console", nil, nil)
	for i := 0; a.status/100 == 3 && i < 5; i++ {
		a = b.do("GET", a.loc, nil, nil)
	}
	if !strings.Contains(a.body, "Sign in to see and manage your VPN in the RunOS console.") {
		b.t.Fatalf("login page: %d %s", a.status, a.body)
	}
	form := inputs(b.t, a.body)
	form.Set("username", email)
	form.Set("password", controltest.Password)
	form.Set("action", "login")
	a = b.do("POST", "/oauth/authorize", form, nil)
	for i := 0; a.status/100 == 3 && i < 5; i++ {
		a = b.do("GET", a.loc, nil, nil)
	}
	if a.status != 200 {
		b.t.Fatalf("after the login form: %d %s", a.status, a.body)
	}
	return a
}

// inputs are the named inputs of the first form of page.
func inputs(t *testing.T, page string) url.Values {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	vs := url.Values{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "input" {
			var name, value string
			for _, a := range n.Attr {
				switch a.Key {
				case "name":
					name = a.Val
				case "value":
					value = a.Val
				}
			}
			if name != "" {
				vs.Set(name, value)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return vs
}

func newKey(t *testing.T) string {
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey().String()
}

// laptop registers a device of email and joins it to ky3.
func laptop(t *testing.T, ctl *controltest.Control, email, name string) *api.Device {
	c := ctl.API(ctl.SignIn(t, email))
	d, err := c.RegisterDevice(context.Background(), api.RegisterDeviceRequest{PublicKey: newKey(t), Name: name, OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.JoinCluster(context.Background(), d.ID, "ky3"); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSignInPageAndRevoke(t *testing.T) {
	ctl := controltest.Start(t)
	d := laptop(t, ctl, "dev@rjwrn.example.com", "dev-laptop")
	b := newBrowser(t, ctl)
	page := b.signIn("ops@rjwrn.example.com").body
	for _, want := range []string{
		"Signed in as <strong>ops@rjwrn.example.com</strong>, operator of rjwrn",
		`<h2 id="title-ky3">ky3 <span class="sub">tc3-ky3 · ky3.rjwrn.example.com</span></h2>`,
		"vpn on node <strong>n1</strong>", "<code>10.77.0.21:32768</code>, private", "UDP 32768",
		"<caption>Devices on ky3</caption>", "dev-laptop", "dev@rjwrn.example.com", "<code>" + d.Address + "</code>",
		`action="/console/devices/` + d.ID + `/revoke"`, `aria-label="Revoke dev-laptop of dev@rjwrn.example.com"`,
		"Latest changes", "device.joined",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// A form posted without its CSRF token, or from elsewhere, does nothing.
	form := inputs(t, page)
	for name, c := range map[string]struct {
		form url.Values
		hdr  map[string]string
	}{
		"no token":    {url.Values{}, nil},
		"wrong token": {url.Values{"csrf": {"x"}}, nil},
		"other site":  {form, map[string]string{"Origin": "https://evil.example"}},
		"cross-site":  {form, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		if a := b.do("POST", "/console/devices/"+d.ID+"/revoke", c.form, c.hdr); a.status != 403 {
			t.Errorf("%s: %d, want 403", name, a.status)
		}
	}
	if dd, _ := ctl.API(controltest.OperatorToken).Device(context.Background(), d.ID); dd.State != api.DeviceActive {
		t.Fatalf("a refused form revoked the device: %s", dd.State)
	}
	// The real form: revoked, gone from the page, in the log.
	if a := b.do("POST", "/console/devices/"+d.ID+"/revoke", form, nil); a.status != 303 || a.loc != "/console" {
		t.Fatalf("revoke: %d %q %s", a.status, a.loc, a.body)
	}
	page = b.do("GET", "/console", nil, nil).body
	if strings.Contains(page, "dev-laptop") && strings.Contains(page, `/console/devices/`+d.ID+`/revoke`) {
		t.Error("the revoked device is still listed with a Revoke button")
	}
	if !strings.Contains(page, "device.revoked") {
		t.Error("the revoke is not in the latest changes")
	}
	log, _ := ctl.API(controltest.OperatorToken).Audit(context.Background(), api.AuditQuery{Kind: "device.revoked"})
	if len(log.Entries) != 1 || log.Entries[0].Actor != "ops@rjwrn.example.com" || log.Entries[0].Source != "127.0.0.1" {
		t.Errorf("audit: %+v", log.Entries)
	}
	// JSON for the script.
	d2 := laptop(t, ctl, "dev@rjwrn.example.com", "dev-desk")
	a := b.do("POST", "/console/devices/"+d2.ID+"/revoke", form, map[string]string{"Accept": "application/json"})
	if a.status != 200 || !strings.Contains(a.body, `"message":"Revoked dev-desk of dev@rjwrn.example.com`) {
		t.Errorf("revoke as JSON: %d %s", a.status, a.body)
	}
	a = b.do("POST", "/console/devices/"+d2.ID+"/revoke", form, map[string]string{"Accept": "application/json"})
	if a.status != 409 || !strings.Contains(a.body, "was already revoked") {
		t.Errorf("revoke twice: %d %s", a.status, a.body)
	}
	// Sign out ends the session on control.
	if a := b.do("POST", "/console/logout", form, nil); a.status != 200 || !strings.Contains(a.body, "You are signed out") {
		t.Fatalf("logout: %d %s", a.status, a.body)
	}
	if a := b.do("GET", "/console", nil, nil); a.status != 303 || a.loc != "/console/login" {
		t.Errorf("after signing out: %d %q", a.status, a.loc)
	}
	// The sign-out's entry names the browser's address too.
	log, _ = ctl.API(controltest.OperatorToken).Audit(context.Background(), api.AuditQuery{Kind: audit.SignedOut, Actor: "ops@rjwrn.example.com"})
	if len(log.Entries) != 1 || log.Entries[0].Source != "127.0.0.1" {
		t.Errorf("audit of the sign-out: %+v", log.Entries)
	}
}

func TestUserSeesOwnDevicesOnly(t *testing.T) {
	ctl := controltest.Start(t)
	mine := laptop(t, ctl, "dev@rjwrn.example.com", "dev-laptop")
	theirs := laptop(t, ctl, "ops@rjwrn.example.com", "ops-laptop")
	b := newBrowser(t, ctl)
	page := b.signIn("dev@rjwrn.example.com").body
	if !strings.Contains(page, "Your devices") || !strings.Contains(page, "dev-laptop") || !strings.Contains(page, `/console/devices/`+mine.ID+`/remove`) {
		t.Errorf("own device missing:\n%s", page)
	}
	for _, no := range []string{"ops-laptop", "Latest changes", "/revoke", "operator of"} {
		if strings.Contains(page, no) {
			t.Errorf("a user sees %q", no)
		}
	}
	form := inputs(t, page)
	json := map[string]string{"Accept": "application/json"}
	if a := b.do("POST", "/console/devices/"+theirs.ID+"/revoke", form, json); a.status != 403 {
		t.Errorf("a user revoking: %d %s", a.status, a.body)
	}
	if a := b.do("POST", "/console/devices/"+theirs.ID+"/remove", form, json); a.status != 404 {
		t.Errorf("a user removing another's device: %d %s", a.status, a.body)
	}
	if a := b.do("POST", "/console/devices/"+mine.ID+"/remove", form, json); a.status != 200 {
		t.Errorf("removing their own: %d %s", a.status, a.body)
	}
	if ds, _ := ctl.API(controltest.OperatorToken).Devices(context.Background(), api.DeviceQuery{}); len(ds) != 1 || ds[0].ID != theirs.ID {
		t.Errorf("devices after the removal: %+v", ds)
	}
}

func TestSignedOutGoesToSignIn(t *testing.T) {
	ctl := controltest.Start(t)
	b := newBrowser(t, ctl)
	if a := b.do("GET", "/console", nil, nil); a.status != 303 || a.loc != "/console/login" {
		t.Fatalf("no session: %d %q", a.status, a.loc)
	}
	a := b.do("GET", "/console/login", nil, nil)
	u, _ := url.Parse(a.loc)
	q := u.Query()
	if a.status != 303 || u.Path != "/oauth/authorize" || q.Get("client_id") != api.ClientConsole || q.Get("code_challenge_method") != "S256" ||
		q.Get("redirect_uri") != ctl.URL+"/console/callback" || q.Get("state") == "" {
		t.Fatalf("login: %d %s", a.status, a.loc)
	}
	// A callback this browser did not start is refused.
	if a := newBrowser(t, ctl).do("GET", "/console/callback?code=x&state="+q.Get("state"), nil, nil); a.status != 400 ||
		!strings.Contains(a.body, "not started in this browser") {
		t.Errorf("foreign callback: %d %s", a.status, a.body)
	}
	// An operator token is no console sign-in.
	req, _ := http.NewRequest("GET", ctl.URL+"/console", nil)
	req.AddCookie(&http.Cookie{Name: "__Host-runos-console", Value: controltest.OperatorToken})
	resp, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 303 {
		t.Errorf("operator token as a session: %d", resp.StatusCode)
	}
}

// The live stream sends the sections after each change, and nothing
// between changes.
func TestEventsFollowChanges(t *testing.T) {
	ctl := controltest.Start(t)
	b := newBrowser(t, ctl)
	page := b.signIn("ops@rjwrn.example.com").body
	since := strings.SplitN(strings.SplitN(page, `data-since="`, 2)[1], `"`, 2)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ctl.URL+"/console/events?since="+since, nil)
	resp, err := b.hc.Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %v %+v", err, resp)
	}
	defer resp.Body.Close()
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev strings.Builder
		for sc.Scan() {
			if sc.Text() == "" {
				events <- ev.String()
				ev.Reset()
				continue
			}
			ev.WriteString(sc.Text() + "\n")
		}
		close(events)
	}()
	if first := <-events; first != "retry: 1000\n" {
		t.Fatalf("first = %q", first)
	}
	select {
	case ev := <-events:
		t.Fatalf("an event with nothing changed: %q", ev)
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	d := laptop(t, ctl, "dev@rjwrn.example.com", "dev-laptop")
	for {
		ev := <-events
		if strings.HasPrefix(ev, "event: update\n") && strings.Contains(ev, d.ID) && strings.Contains(ev, "device.joined") {
			t.Logf("the joined device reached the page's stream %s after the request to sign in", time.Since(start))
			break
		}
		if ev == "" {
			t.Fatal("stream ended")
		}
	}
	// Signing out elsewhere (the session ends) tells the page.
	form := inputs(t, page)
	b.do("POST", "/console/logout", form, nil)
	for ev := range events {
		if strings.HasPrefix(ev, "event: signedout\n") {
			return
		}
	}
	t.Fatal("no signedout event")
}
