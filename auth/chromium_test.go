package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runos/vpn/internal/netnstest"
)

// chromium is a real headless Chromium (Debian's /usr/bin/chromium) as the
// user's browser: it loads the login page, a person's keystrokes fill it,
// a click submits it, and Chromium itself follows the redirect to the
// loopback listener, with the page's CSP (form-action included) enforced.
type chromium struct {
	ctx      context.Context
	password string
	done     chan error
	final    chan string
}

func (c *chromium) Open(u string) error {
	go func() {
		err := chromedp.Do(c.ctx,
			chromedp.Navigate(u),
			chromedp.WaitVisible(`#username`),
			chromedp.SendKeys(`#username`, testUser),
			chromedp.SendKeys(`#password`, c.password),
			chromedp.Click(`button[value="login"]`),
		)
		var loc, text string
		// The click navigates (POST, then the redirect to the loopback
		// page): read where the tab is until it is on plain http, or the
		// login page shows an error.
		for err == nil && !strings.HasPrefix(loc, "http:") && !strings.Contains(text, "role=\"alert\"") {
			if c.ctx.Err() != nil {
				err = c.ctx.Err()
				break
			}
			time.Sleep(50 * time.Millisecond)
			loc, _ = chromedp.Run(c.ctx, chromedp.Location())
			text, _ = chromedp.Run(c.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerHTML : ""`))
		}
		if err == nil {
			text, err = chromedp.Run(c.ctx, chromedp.Text(`main`))
		}
		c.final <- loc + "\n" + text
		c.done <- err
	}()
	return nil
}

func TestSignInWithChromium(t *testing.T) {
	netnstest.Require(t, "chromium")
	c := newControl(t, nil)
	// Trust exactly the test server's key, nothing else.
	spki := sha256.Sum256(c.srv.Certificate().RawSubjectPublicKeyInfo)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("/usr/bin/chromium"),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 2*time.Minute)
	defer cancelTimeout()

	browser := &chromium{ctx: bctx, password: testPassword, done: make(chan error, 1), final: make(chan string, 1)}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tok, err := c.flow(browser, newLines()).SignInBrowser(ctx)
	if err != nil {
		t.Fatalf("sign-in: %v (browser: %v)", err, <-browser.done)
	}
	if c.backend.user(tok.AccessToken) != testUser {
		t.Fatalf("token %q is no session of alice", tok.AccessToken)
	}
	page := <-browser.final
	if err := <-browser.done; err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if !strings.HasPrefix(page, "http://127.0.0.1:") || !strings.Contains(page, "Signed in, you can close this tab.") {
		t.Fatalf("chromium ended on %q", page)
	}
}
