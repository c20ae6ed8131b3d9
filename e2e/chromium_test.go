//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/runos/vpn/internal/chromiumtest"
	"github.com/runos/vpn/internal/netnstest"
	"github.com/runos/vpn/internal/syncbuf"
	"github.com/runos/vpn/vpnd/localapi"
)

// TestVPNUpWithChromium signs in through a real headless Chromium on the
// laptop, against the lab's real control (its SQLite store, its login page
// over the lab's TLS): `runos vpn up` hands the authorize URL to $BROWSER,
// Chromium (inside the laptop's network and mount namespaces, so its
// 127.0.0.1 is the CLI's) loads the page, keystrokes fill it, a click
// submits it, and Chromium itself follows control's redirect to the CLI's
// loopback listener, with the page's CSP enforced. The other tests use the
// Go form-poster (auth/formlogin), which is faster.
func TestVPNUpWithChromium(t *testing.T) {
	netnstest.Require(t, "chromium", "nsenter")
	w := newWorld(t, 1, 0)
	laptop := w.env.Client.Host

	bctx := w.chromium(t, laptop)
	authorize, up := w.upWithBrowserHandover(t, laptop, nil, "ky3")
	if !strings.HasPrefix(authorize, w.env.APIURL+"/oauth/authorize?") {
		t.Fatalf("authorize URL %q", authorize)
	}

	var err error // the first step that failed: the later ones are not taken
	step := func(what string, a chromedp.Action[chromedp.Void]) {
		if err == nil {
			if err = chromedp.Do(bctx, a); err != nil {
				err = fmt.Errorf("%s: %w", what, err)
			}
		}
	}
	step("load the login page", chromiumtest.Navigate(authorize))
	step("find its form", chromedp.WaitVisible(chromedp.ID("username")))
	step("type the email", chromedp.SendKeys(chromedp.ID("username"), w.env.User))
	step("type the password", chromedp.SendKeys(chromedp.ID("password"), w.env.Password))
	step("press Sign in", chromedp.Click(chromedp.CSS(`button[value="login"]`)))
	// The click posts the form; control redirects Chromium to the CLI's
	// listener, which answers with its page: the tab's location says when.
	final, err := waitLoopback(bctx, err)
	w.checkLoopbackPage(bctx, final, err)
	r := <-up
	if r.err != nil {
		t.Fatalf("runos vpn up: %v", r.err)
	}
	if !strings.Contains(r.out, "ky3 is up") {
		t.Errorf("runos vpn up said:\n%s", r.out)
	}
	st := w.waitStatus(laptop, 30*time.Second, "connected to ky3", upOn("n1", "ky3"))
	if st.Session.State != localapi.SessionSignedIn || st.Session.User != w.env.User || st.Control != w.env.APIURL {
		t.Errorf("after the sign-in: session %+v, control %q", st.Session, st.Control)
	}
	if n := w.browserLaunches(laptop); n != 0 {
		t.Errorf("the lab's scripted browser ran %d times: this sign-in was Chromium's", n)
	}
}

// chromium starts a headless Chromium on a laptop (inside its network and
// mount namespaces, so its 127.0.0.1 is the CLI's) trusting control's
// certificate and the more given, for the rest of the test (3 minutes).
func (w *world) chromium(t *testing.T, laptop string, alsoTrust ...string) context.Context {
	t.Helper()
	var chromiumLog syncbuf.Buffer // Chromium's own output, shown if the test fails
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- chromium's output on %s:\n%s", laptop, chromiumLog.String())
		}
	})
	bctx := chromiumtest.New(t, chromiumtest.Options{
		// Chromium trusts exactly control's key: the lab's certificate.
		CertFile:  filepath.Join(w.env.Dir, "control", "cert.pem"),
		AlsoTrust: alsoTrust,
		Output:    &chromiumLog,
		// Run on the laptop: the same argv (and the DevTools pipe on fds 3
		// and 4) through nsenter into its namespaces.
		Command: func(cmd *exec.Cmd) {
			lc, err := w.lab.Command(t.Context(), laptop, nil, cmd.Args...)
			if err != nil {
				t.Errorf("chromium on %s: %v", laptop, err)
				return
			}
			cmd.Path, cmd.Args, cmd.Env = lc.Path, lc.Args, lc.Env
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		},
	})
	bctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(cancel)
	return bctx
}

// cmdResult is a command's output and error.
type cmdResult struct {
	out string
	err error
}

// upWithBrowserHandover starts `runos vpn up --cid cid` on a laptop whose
// $BROWSER hands the authorize URL over to the test (for its Chromium):
// it returns that URL and the command's result to come.
func (w *world) upWithBrowserHandover(t *testing.T, laptop string, extra []string, cid string) (string, <-chan cmdResult) {
	t.Helper()
	dir := t.TempDir()
	urlFile := filepath.Join(dir, "authorize-url")
	browser := filepath.Join(dir, "browser")
	if err := os.WriteFile(browser, []byte("#!/bin/sh\nprintf '%s\\n' \"$1\" > "+urlFile+".tmp && mv "+urlFile+".tmp "+urlFile+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	up := make(chan cmdResult, 1)
	go func() {
		out, err := w.run(laptop, append([]string{"BROWSER=" + browser}, extra...), "runos", "vpn", "up", "--cid", cid)
		up <- cmdResult{out, err}
	}()
	var authorize string
	w.waitFor(time.Minute, "runos vpn up to open the browser", func() bool {
		b, err := os.ReadFile(urlFile)
		authorize = strings.TrimSpace(string(b))
		return err == nil
	})
	return authorize, up
}

// waitLoopback waits until Chromium's tab is at the CLI's loopback
// listener (after control's redirect), unless err already failed a step.
func waitLoopback(bctx context.Context, err error) (string, error) {
	var final string
	for deadline := time.Now().Add(time.Minute); err == nil && !strings.HasPrefix(final, "http://127.0.0.1:"); time.Sleep(20 * time.Millisecond) {
		if final, err = chromedp.Run(bctx, chromedp.Location()); err == nil && time.Now().After(deadline) {
			err = fmt.Errorf("still at %s a minute after the click", final)
		}
	}
	return final, err
}

// checkLoopbackPage fails the test unless the CLI's page in Chromium says
// the sign-in worked.
func (w *world) checkLoopbackPage(bctx context.Context, final string, err error) {
	w.t.Helper()
	text := ""
	if err == nil {
		text, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
	}
	if err != nil {
		w.t.Fatalf("chromium: %v", err)
	}
	if !strings.Contains(text, "Signed in, you can close this tab.") {
		w.t.Errorf("the CLI's page in Chromium at %s says %q", final, text)
	}
}
