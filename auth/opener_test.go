package auth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/auth/formlogin"
)

func TestSplitShell(t *testing.T) {
	for in, want := range map[string][]string{
		"firefox":                               {"firefox"},
		"  open   -a  Safari ":                  {"open", "-a", "Safari"},
		`runos-lab browser --dir "/tmp/my lab"`: {"runos-lab", "browser", "--dir", "/tmp/my lab"},
		`a 'b c' "d e" f\ g`:                    {"a", "b c", "d e", "f g"},
		`'it''s'`:                               {"its"},
		`"say \"hi\" \$x \n"`:                   {`say "hi" $x \n`},
		`a"b"'c'd`:                              {"abcd"},
		`""`:                                    {""},
		"a\\\nb":                                {"ab"},
		"x\ty\nz":                               {"x", "y", "z"},
		`$HOME | ; &`:                           {"$HOME", "|", ";", "&"},
		"":                                      nil,
	} {
		got, err := splitShell(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("splitShell(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`'open`, `"open`, `trailing\`} {
		if _, err := splitShell(bad); err == nil {
			t.Errorf("splitShell(%q): no error", bad)
		}
	}
}

func FuzzSplitShell(f *testing.F) {
	for _, s := range []string{`a 'b c' "d\" e" f\ g`, `'`, `"\`, "a\\\nb", `""''`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitShell(s)
		if err != nil {
			return
		}
		// Quoting every word back and splitting again gives the same words.
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		again, err := splitShell(strings.Join(quoted, " "))
		if err != nil || !reflect.DeepEqual(again, words) && !(len(again) == 0 && len(words) == 0) {
			t.Fatalf("splitShell(%q) = %q; requoted gives %q, %v", s, words, again, err)
		}
	})
}

func TestBrowserCommand(t *testing.T) {
	const u = "https://control.example/oauth/authorize?a=1&b=2"
	for env, want := range map[string][]string{
		"firefox":                  {"firefox", u},
		"firefox --new-window":     {"firefox", "--new-window", u},
		"chromium --app=%s":        {"chromium", "--app=" + u},
		`sh -c 'echo %s' x`:        {"sh", "-c", "echo " + u, "x"},
		`"/opt/My Browser/bin" -p`: {"/opt/My Browser/bin", "-p", u},
	} {
		got, err := browserCommand(env, u)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("browserCommand(%q) = %q, %v; want %q", env, got, err, want)
		}
	}
	for _, bad := range []string{"''", `"unterminated`} {
		if _, err := browserCommand(bad, u); err == nil {
			t.Errorf("browserCommand(%q): no error", bad)
		}
	}
}

// The command in $BROWSER is really run, with its arguments and the URL.
func TestSystemOpenerRunsBrowser(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "record browser")
	record := filepath.Join(dir, "args")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \""+record+"\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"BROWSER": fmt.Sprintf("%q --flag 'two words'", script)}
	o := SystemOpener(func(k string) string { return env[k] }).(*systemOpener)
	exited, err := o.start("https://control.example/x?y=1")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(record)
	if got := string(b); got != "--flag\ntwo words\nhttps://control.example/x?y=1\n" {
		t.Fatalf("browser got %q", got)
	}
	env["BROWSER"] = filepath.Join(dir, "missing")
	if err := o.Open("https://x"); err == nil || !strings.Contains(err.Error(), "BROWSER=") {
		t.Fatalf("missing browser: %v", err)
	}
}

// browserHelperEnv makes this test binary act as a $BROWSER: it signs in
// through the login page with formlogin, as `runos-lab browser` does.
const browserHelperEnv = "RUNOS_AUTH_TEST_BROWSER"

func TestMain(m *testing.M) {
	if os.Getenv(browserHelperEnv) == "1" {
		os.Exit(actAsBrowser())
	}
	os.Exit(m.Run())
}

func actAsBrowser() int {
	url := os.Args[len(os.Args)-1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hc, err := clientTrusting(os.Getenv("RUNOS_AUTH_TEST_CA"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	res, err := formlogin.Login(ctx, hc, url, testUser, os.Getenv("RUNOS_AUTH_TEST_PASSWORD"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "browser:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "browser:", strings.SplitN(res.Body, "\n", 2)[0])
	return 0
}

// The whole CLI path: SystemOpener runs $BROWSER (this binary as a
// scripted browser), which signs in through the real page.
func TestSignInWithBrowserCommand(t *testing.T) {
	c := newControl(t, nil)
	ca := writeCA(t, c)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(password string) (*Token, string, error) {
		env := map[string]string{"BROWSER": fmt.Sprintf("env %s=1 RUNOS_AUTH_TEST_CA=%q RUNOS_AUTH_TEST_PASSWORD=%q %q -test.run=^$", browserHelperEnv, ca, password, exe)}
		out := newLines()
		var tok *Token
		var err error
		if password == testPassword {
			tok, err = c.flow(SystemOpener(func(k string) string { return env[k] }), out).SignIn(t.Context(), false)
		} else {
			approved := approveDevice(t.Context(), t, c, out, testPassword)
			tok, err = c.flow(SystemOpener(func(k string) string { return env[k] }), out).SignIn(t.Context(), false)
			if aerr := <-approved; aerr != nil {
				t.Fatal(aerr)
			}
		}
		return tok, out.String(), err
	}
	tok, out, err := run(testPassword)
	if err != nil || c.backend.user(tok.AccessToken) != testUser {
		t.Fatalf("sign-in: %v (%s)", err, out)
	}
	// A browser command that fails (wrong password: it exits 1) leaves the
	// device grant as the way in.
	tok, out, err = run("wrong")
	if err != nil || c.backend.user(tok.AccessToken) != testUser {
		t.Fatalf("fallback sign-in: %v (%s)", err, out)
	}
	if !strings.Contains(out, "Could not open a browser") || !strings.Contains(out, "exit status 1") {
		t.Fatalf("printed %q", out)
	}
}

// Where no browser can show, the system opener does not try (and says
// why); $BROWSER set is always tried.
func TestHeadless(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool // headless
	}{
		{map[string]string{}, noDisplay(func(string) string { return "" }) != ""},
		{map[string]string{"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, false},
		{map[string]string{"BROWSER": "w3m"}, false},
		{map[string]string{"BROWSER": "  "}, noDisplay(func(string) string { return "" }) != ""},
	} {
		get := func(k string) string { return tc.env[k] }
		if got := headless(get) != ""; got != tc.want {
			t.Errorf("headless(%v) = %v, want %v", tc.env, got, tc.want)
		}
		err := SystemOpener(get).(*systemOpener).available()
		if (err != nil) != tc.want {
			t.Errorf("available(%v) = %v", tc.env, err)
		}
	}
}
