package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSetChecksValues(t *testing.T) {
	cases := []struct {
		key, value, want, err string
	}{
		{KeyCID, "ky3", "ky3", ""},
		{KeyCID, "KY3", "", "a cid is 3 to 16 lowercase letters and digits"},
		{KeyCID, "k", "", "a cid is 3 to 16 lowercase letters and digits"},
		{KeyCID, "abcdefghijklmnopq", "", "a cid is 3 to 16 lowercase letters and digits"},
		{KeyCID, "ky-3", "", "a cid is 3 to 16 lowercase letters and digits"},
		{KeyAPIURL, "https://198.51.100.10", "https://198.51.100.10", ""},
		{KeyAPIURL, "https://control.example.com:8443/", "https://control.example.com:8443", ""},
		{KeyAPIURL, "http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{KeyAPIURL, "ftp://x", "", "want https://host"},
		{KeyAPIURL, "https://h/runos", "", "no user, path"},
		{KeyAPIURL, "control.example.com", "", "want https://host"},
		{KeyAPIURL, "https://", "", "want https://host"},
		{KeyAPIURL, "https://u:p@h", "", "no user"},
		{KeyAPIURL, "https://h/?x=1", "", "no user, path, query"},
		{KeyCAFile, "/etc/ca.pem", "/etc/ca.pem", ""},
		{"colour", "blue", "", `unknown config key "colour" (known keys: cid, api-url, ca-file, mtu)`},
	}
	for _, c := range cases {
		cfg := &Config{}
		err := cfg.Set(c.key, c.value)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Set(%q, %q) = %v, want error containing %q", c.key, c.value, err, c.err)
			}
			if len(cfg.values) != 0 {
				t.Errorf("Set(%q, %q) failed but changed the config: %v", c.key, c.value, cfg.values)
			}
			continue
		}
		if err != nil {
			t.Errorf("Set(%q, %q): %v", c.key, c.value, err)
			continue
		}
		if got := cfg.Get(c.key); got != c.want {
			t.Errorf("Set(%q, %q) stored %q, want %q", c.key, c.value, got, c.want)
		}
	}
}

func TestCAFileMadeAbsolute(t *testing.T) {
	cfg := &Config{}
	if err := cfg.Set(KeyCAFile, "ca.pem"); err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(cfg.Get(KeyCAFile)) {
		t.Fatalf("ca-file %q is not absolute", cfg.Get(KeyCAFile))
	}
}

func TestParse(t *testing.T) {
	good := []string{"", "  \n", "{}", `{"cid":"ky3"}`, `{"cid":"ky3","api-url":"https://h","ca-file":"/c.pem"}`}
	for _, s := range good {
		if _, err := Parse([]byte(s)); err != nil {
			t.Errorf("Parse(%q): %v", s, err)
		}
	}
	bad := map[string]string{
		`null`:                    "not a JSON object",
		`[]`:                      "not a JSON object",
		`{"cid": 3}`:              `key "cid": want a string`,
		`{"cid":"KY3"}`:           "a cid is 3 to 16",
		`{"nope":"x"}`:            "unknown config key",
		`{"cid":"ky3"} {}`:        "trailing data",
		`{"api-url":"gopher://"}`: "api-url",
		`{`:                       "not a JSON object",
	}
	for s, want := range bad {
		_, err := Parse([]byte(s))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want error containing %q", s, err, want)
		}
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "config.json")
	c, err := Load(path)
	if err != nil {
		t.Fatalf("missing file: %v", err)
	}
	for k, v := range map[string]string{KeyCID: "ky3", KeyAPIURL: "https://198.51.100.10", KeyCAFile: "/tmp/ca.pem"} {
		if err := c.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Save(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", di.Mode().Perm())
	}
	c2, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(c2.Marshal()), string(c.Marshal()); got != want {
		t.Errorf("round trip:\n%s\nwant\n%s", got, want)
	}
	// No temporary files left behind.
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only config.json", len(ents))
	}
}

func TestLoadBadFileNamesPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(`{"cid":"Nope!"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "fix or remove it") {
		t.Fatalf("Load = %v, want an error naming %s", err, path)
	}
}

func TestPath(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	dir := func() (string, error) { return "/home/u/.config", nil }
	if p, _ := Path(getenv, dir); p != "/home/u/.config/runos/config.json" {
		t.Errorf("default path %q", p)
	}
	env[EnvConfig] = "/x/c.json"
	if p, _ := Path(getenv, dir); p != "/x/c.json" {
		t.Errorf("RUNOS_CONFIG path %q", p)
	}
}

func TestResolveEnvOverrides(t *testing.T) {
	c, _ := Parse([]byte(`{"cid":"ky3","api-url":"https://file.example","ca-file":"/file.pem"}`))
	env := map[string]string{EnvAPIURL: "https://env.example", EnvCAFile: "/env.pem"}
	e, err := Resolve(c, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if e.CID != "ky3" || e.APIURL != "https://env.example" || e.CAFile != "/env.pem" {
		t.Errorf("resolved %+v", e)
	}
	if e.Source[KeyAPIURL] != "env RUNOS_API_URL" || e.Source[KeyCID] != "config" {
		t.Errorf("sources %v", e.Source)
	}
	env[EnvAPIURL] = "nope"
	if _, err := Resolve(c, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "RUNOS_API_URL") {
		t.Errorf("bad RUNOS_API_URL: %v", err)
	}
}

// FuzzParse feeds arbitrary bytes to the config parser: it must never panic,
// and whatever it accepts must survive a Marshal/Parse round trip unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"cid":"ky3","api-url":"https://198.51.100.10","ca-file":"/etc/ca.pem"}`))
	f.Add([]byte(`{"cid":"KY3"}`))
	f.Add([]byte(`{"api-url":"http://[::1]:80/"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"cid":"ky3"}{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		out := c.Marshal()
		c2, err := Parse(out)
		if err != nil {
			t.Fatalf("accepted %q but not its own output %q: %v", b, out, err)
		}
		if string(c2.Marshal()) != string(out) {
			t.Fatalf("round trip changed %q to %q", out, c2.Marshal())
		}
	})
}

func TestMTUKey(t *testing.T) {
	var c Config
	for _, bad := range []string{"1279", "9001", "big", "-1"} {
		if err := c.Set(KeyMTU, bad); err == nil {
			t.Errorf("mtu %q accepted", bad)
		}
	}
	if err := c.Set(KeyMTU, " 1380"); err != nil || c.Get(KeyMTU) != "1380" {
		t.Fatalf("mtu 1380: %v, stored %q", err, c.Get(KeyMTU))
	}
	e, err := Resolve(&c, func(string) string { return "" })
	if err != nil || e.MTU != 1380 || e.Source[KeyMTU] != "config" {
		t.Errorf("effective mtu %d (%v)", e.MTU, err)
	}
}
