package console_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/controltest"
	"github.com/runos/vpn/internal/chromiumtest"
	"github.com/runos/vpn/internal/testenv"
)

// The console in a real browser (headless Chromium, the page's CSP and
// script as they are) against a real control: sign in through the login
// form, see the device with its handshake, Revoke it and watch it leave
// the page by the live stream alone, follow a move's progress, and read it
// all on a phone-sized window. (e2e/TestConsoleInTheLab does the same
// against a lab's control, laptops and gateways.)
func TestConsoleInChromium(t *testing.T) {
	testenv.Tools(t, "chromium")
	ctl := controltest.Start(t)
	ctx := context.Background()
	d := laptop(t, ctl, "dev@rjwrn.example.com", "dev-laptop")
	// ky3's gateway serves and sees the device's handshake.
	gw := ctl.API("enroll-ky3-n1-0123456789")
	m, err := gw.GatewayMap(ctx, 0, 0)
	if err != nil || m.Serve == nil {
		t.Fatalf("gateway map: %+v, %v", m, err)
	}
	k, _ := wgtypes.GeneratePrivateKey()
	hs := time.Now().UTC().Truncate(time.Second)
	if err := gw.GatewayReport(ctx, api.GatewayReport{PublicKey: k.PublicKey().String(), ServiceID: m.Serve.ServiceID, Listening: true,
		ListenPort: m.Serve.Port, MapVersion: m.Version, Handshakes: []api.PeerHandshake{{PublicKey: d.PublicKey, At: hs}}}); err != nil {
		t.Fatal(err)
	}

	b := chromiumtest.New(t, chromiumtest.Options{CertFile: ctl.CAFile})
	b, cancel := context.WithTimeout(b, 2*time.Minute)
	defer cancel()
	row := `tr[data-device="` + d.ID + `"]`
	err = chromedp.Do(b,
		chromedp.Navigate(ctl.URL+"/console"),
		chromedp.WaitVisible(`#username`),
		chromedp.SendKeys(`#username`, "ops@rjwrn.example.com"),
		chromedp.SendKeys(`#password`, controltest.Password),
		chromedp.Click(`button[value="login"]`),
		chromedp.WaitVisible(row),
		chromedp.WaitVisible(`body[data-live="connected"]`),
	)
	if err != nil {
		t.Fatalf("sign in: %v", err)
	}
	text, err := chromedp.Run(b, chromedp.Text(row))
	if err != nil || !strings.Contains(text, "dev-laptop") || !strings.Contains(text, hs.Format("2006-01-02 15:04:05 UTC")) {
		t.Fatalf("device row %q, %v", text, err)
	}
	// Revoke: the row leaves the page through the live stream.
	start := time.Now()
	if err := chromedp.Do(b, chromedp.Click(`#revoke-`+d.ID), chromedp.WaitNotPresent(row)); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	t.Logf("click Revoke → the row gone from the page: %s", time.Since(start))
	live, _ := chromedp.Run(b, chromedp.Text(`#live`))
	if !strings.Contains(live, "Revoked dev-laptop of dev@rjwrn.example.com") {
		t.Errorf("live region says %q", live)
	}
	if dd, _ := ctl.API(controltest.OperatorToken).Device(ctx, d.ID); dd.State != api.DeviceRevoked {
		t.Errorf("device state %q after the click", dd.State)
	}
	if err := chromedp.Do(b, chromedp.WaitVisible(`//td[text()="device.revoked"]`)); err != nil {
		t.Errorf("the revoke did not reach the latest changes: %v", err)
	}
	// A move started elsewhere shows its progress as it goes.
	gw2 := ctl.API("enroll-ky3-n2-0123456789")
	if err := gw2.GatewayReport(ctx, api.GatewayReport{Version: "test"}); err != nil { // n2 heartbeats
		t.Fatal(err)
	}
	if _, err := ctl.API(controltest.OperatorToken).StartMove(ctx, "ky3", "wg-ky3", "n2"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(b, chromedp.WaitVisible(`#cluster-ky3 .move.preparing`)); err != nil {
		t.Fatalf("the move's progress: %v", err)
	}
	m2, err := gw2.GatewayMap(ctx, 0, 0)
	if err != nil || m2.Serve == nil {
		t.Fatalf("n2's map: %+v, %v", m2, err)
	}
	k2, _ := wgtypes.GeneratePrivateKey()
	if err := gw2.GatewayReport(ctx, api.GatewayReport{PublicKey: k2.PublicKey().String(), ServiceID: m2.Serve.ServiceID, Listening: true,
		ListenPort: m2.Serve.Port, MapVersion: m2.Version}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(b, chromedp.WaitVisible(`#cluster-ky3 .move.done`)); err != nil {
		t.Fatalf("the move's end: %v", err)
	}
	if txt, _ := chromedp.Run(b, chromedp.Text(`#cluster-ky3 .service`)); !strings.Contains(txt, "vpn on node n2") {
		t.Errorf("the service after the move: %q", txt)
	}
	screenshot(t, b, "RUNOS_CONSOLE_SCREENSHOT")
	// A narrow window: nothing runs off the side.
	var wide bool
	err = chromedp.Do(b, chromedp.EmulateViewport(360, 780), chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		var err error
		wide, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
		return err
	}))
	screenshot(t, b, "RUNOS_CONSOLE_SCREENSHOT_NARROW")
	if err != nil || wide {
		culprits, _ := chromedp.Run(b, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('body *')).filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right) + ' ' + (e.textContent||'').slice(0, 40))`))
		dims, _ := chromedp.Run(b, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth, document.documentElement.clientWidth, document.body.scrollWidth]`))
		t.Errorf("narrow window: wider than the screen (%v, %v): %q %v", wide, err, culprits, dims)
	}
	// Remove a user: their row leaves the page through the live stream.
	urow := `tr[data-user="rjwrn/dev@rjwrn.example.com"]`
	if err := chromedp.Do(b, chromedp.Click(`button[aria-label="Remove dev@rjwrn.example.com from rjwrn"]`), chromedp.WaitNotPresent(urow)); err != nil {
		t.Fatalf("remove the user: %v", err)
	}
	if live, _ := chromedp.Run(b, chromedp.Text(`#live`)); !strings.Contains(live, "Removed dev@rjwrn.example.com from rjwrn") {
		t.Errorf("live region says %q", live)
	}
	if us, err := ctl.API(controltest.OperatorToken).Users(ctx, "rjwrn"); err != nil || len(us) != 1 {
		t.Errorf("users after the click: %+v, %v", us, err)
	}
}

// screenshot writes the page as a PNG to the file named by the
// environment variable env, when it is set (docs/console.png is made so).
func screenshot(t *testing.T, b context.Context, env string) {
	path := os.Getenv(env)
	if path == "" {
		return
	}
	png, err := chromedp.Run(b, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(path, png, 0o644)
	}
	if err != nil {
		t.Errorf("screenshot %s: %v", path, err)
	}
}
