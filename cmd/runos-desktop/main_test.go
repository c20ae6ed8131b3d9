package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	var errb bytes.Buffer
	o, err := parseFlags([]string{"--at-login", "--socket", "/tmp/x.sock", "--console-url", "https://console.example"}, &errb)
	if err != nil || !o.atLogin || o.socket != "/tmp/x.sock" || o.consoleURL != "https://console.example" {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := parseFlags([]string{"extra"}, &errb); err == nil || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
		t.Fatalf("extra argument: %v", err)
	}
	errb.Reset()
	if _, err := parseFlags([]string{"--help"}, &errb); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("help: %v", err)
	}
	for _, want := range []string{"--at-login", "never opens a browser", "sudo runos vpn install", "RUNOS_VPND_SOCKET"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestRunHelpAndVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "runos-desktop ") {
		t.Fatalf("version: %d %q", code, out.String())
	}
	if code := run([]string{"--bogus"}, &out, &errb); code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
}

func TestLogStartsOverWhenLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "desktop.log")
	f, err := openLog(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(bytes.Repeat([]byte("x"), maxLog+1))
	f.Close()
	f, err = openLog(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("fresh\n"))
	f.Close()
	b, _ := os.ReadFile(p)
	if string(b) != "fresh\n" {
		t.Fatalf("log kept %d bytes", len(b))
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
}
