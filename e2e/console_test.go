//go:build !windows

package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runos/vpn/internal/chromiumtest"
	"github.com/runos/vpn/internal/testenv"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestConsoleInTheLab: the console in headless Chromium against the lab's
// control (the browser's connections start on the laptop, through the
// LAN/WAN of the lab): sign in through the login form, see the laptop with
// its handshake, follow a move started from the CLI live, click Revoke and
// watch the laptop leave the page and the gateway. With
// RUNOS_CONSOLE_SCREENSHOT=FILE it writes the page (docs/console.png).
func TestConsoleInTheLab(t *testing.T) {
	w := newWorld(t, 1, 0)
	testenv.Tools(t, "chromium")
	laptop := w.env.Client.Host
	w.must(laptop, nil, "runos", "vpn", "up", "--cid", "ky3")
	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("n1", "ky3"))
	dev, key := st.Session.DeviceID, st.Tunnel.PublicKey

	b := chromiumtest.New(t, chromiumtest.Options{
		CertFile: filepath.Join(w.env.Dir, "control", "cert.pem"),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return w.lab.Dial(ctx, laptop, network, addr)
		},
	})
	b, cancel := context.WithTimeout(b, 3*time.Minute)
	defer cancel()
	row := `#cluster-ky3 tr[data-device="` + dev + `"]`
	err := chromedp.Do(b,
		chromiumtest.Navigate(w.env.APIURL+"/console"),
		chromedp.WaitVisible(`#username`),
		chromedp.SendKeys(`#username`, w.env.User),
		chromedp.SendKeys(`#password`, w.env.Password),
		chromedp.Click(`button[value="login"]`),
		chromedp.WaitVisible(row),
		chromedp.WaitVisible(`body[data-live="connected"]`),
	)
	if err != nil {
		t.Fatalf("sign in to the console: %v", err)
	}
	// The laptop with its user, address and a handshake (the gateway's report).
	if err := chromedp.Do(b, chromedp.WaitVisible(row+` time.handshake:not([datetime="0001-01-01T00:00:00Z"])`)); err != nil {
		t.Fatalf("no handshake on the page: %v", err)
	}
	text, _ := chromedp.Run(b, chromedp.Text(row))
	if !strings.Contains(text, w.env.User) || !strings.Contains(text, strings.TrimSuffix(st.Tunnel.Addresses[0], "/32")) {
		t.Errorf("the laptop's row: %q", text)
	}
	if path := os.Getenv("RUNOS_CONSOLE_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(b, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.WriteFile(path, png, 0o644)
		}
		if err != nil {
			t.Errorf("screenshot: %v", err)
		}
	}

	// A move from the CLI: the page follows it without a reload.
	_, err = chromedp.Run(b, chromedp.Evaluate[bool](`(function () {
		window.moves = [];
		var note = function () {
			var m = document.querySelector('#cluster-ky3 .move');
			if (!m) return;
			var s = m.className + ' | ' + m.querySelector('.switched').textContent;
			if (window.moves[window.moves.length - 1] !== s) window.moves.push(s);
		};
		new MutationObserver(note).observe(document.getElementById('clusters'), {subtree: true, childList: true});
		return true;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	w.must(laptop, []string{"RUNOS_TOKEN=" + w.env.OperatorToken}, "runos", "services", "wireguard", "move", "vpn-ky3",
		"--cid", "ky3", "--target-node-id", "n2", "--follow")
	if err := chromedp.Do(b, chromedp.WaitVisible(`#cluster-ky3 .move.done`)); err != nil {
		t.Fatalf("the move's end on the page: %v", err)
	}
	moves, _ := chromedp.Run(b, chromedp.Evaluate[[]string](`window.moves`))
	t.Logf("the move as the page showed it: %q", moves)
	if len(moves) == 0 || !strings.Contains(moves[len(moves)-1], "move done | 1 of 1 devices switched") {
		t.Errorf("the page's move states: %q", moves)
	}
	if txt, _ := chromedp.Run(b, chromedp.Text(`#cluster-ky3 .service`)); !strings.Contains(txt, "on node n2") {
		t.Errorf("the service after the move: %q", txt)
	}
	w.waitStatus(laptop, 10*time.Second, "on n2", upOn("n2", "ky3"))

	// Revoke from the page: the row leaves it, the key leaves the gateway.
	start := time.Now()
	if err := chromedp.Do(b, chromedp.Click(`#revoke-`+dev), chromedp.WaitNotPresent(row)); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	t.Logf("click Revoke → the laptop gone from the page: %s", time.Since(start))
	w.waitFor(time.Second, "the key gone from ky3-n2", func() bool { return !strings.Contains(w.gatewayPeers("ky3-n2"), key) })
	w.waitStatus(laptop, 10*time.Second, "revoked", func(s *localapi.Status) bool { return s.Session.State == localapi.SessionRevoked })
	if err := chromedp.Do(b, chromedp.WaitVisible(`//td[text()="device.revoked"]`)); err != nil {
		t.Errorf("the revoke is not in the page's latest changes: %v", err)
	}
}
