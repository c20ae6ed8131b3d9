// Package config is the user's RunOS configuration: a small JSON object of
// string keys (cid, api-url, ca-file) in the user's config directory, read
// by the CLI and RunOS Desktop. Every value is checked when it is set and
// when the file is read, so a bad file is reported with its path instead of
// surfacing later as a confusing request error.
package config

import (
	"github.com/runos/vpn/internal/atomicfile"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/runos/vpn/api"
)

// Environment variables that override the file (docs/internals.md).
const (
	EnvConfig = "RUNOS_CONFIG"  // the file's path
	EnvAPIURL = "RUNOS_API_URL" // overrides api-url
	EnvCAFile = "RUNOS_CA_FILE" // overrides ca-file
)

// Keys of the config file.
const (
	KeyCID    = "cid"
	KeyAPIURL = "api-url"
	KeyCAFile = "ca-file"
	KeyMTU    = "mtu"
)

// key describes one setting: what it means and how a value is checked.
type key struct {
	name  string
	env   string // environment variable that overrides it, if any
	help  string
	check func(string) (string, error) // returns the value to store
}

var keys = []key{
	{KeyCID, "", "default cluster for --cid and `runos vpn up`", checkCID},
	{KeyAPIURL, EnvAPIURL, "runos-control's URL, https://host[:port] (commands refuse http:// unless run with --insecure-http)", CheckAPIURL},
	{KeyCAFile, EnvCAFile, "PEM file of the CA that signs control's certificate (empty: the system roots)", checkCAFile},
	{KeyMTU, "", "the tunnel's MTU, read by `runos vpnd` when --mtu is not given (1280 to 9000; empty: 1420)", checkMTU},
}

// MinMTU and MaxMTU bound the tunnel's MTU: IPv6 needs 1280, and no path
// carries more than a jumbo frame.
const (
	MinMTU = 1280
	MaxMTU = 9000
)

// CheckMTU accepts a tunnel MTU.
func CheckMTU(n int) error {
	if n < MinMTU || n > MaxMTU {
		return fmt.Errorf("invalid mtu %d: want %d to %d (WireGuard over a 1500-byte path: 1420)", n, MinMTU, MaxMTU)
	}
	return nil
}

func checkMTU(v string) (string, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return "", fmt.Errorf("invalid mtu %q: want a number of bytes, e.g. 1420", v)
	}
	if err := CheckMTU(n); err != nil {
		return "", err
	}
	return strconv.Itoa(n), nil
}

func lookup(name string) (key, bool) {
	for _, k := range keys {
		if k.name == name {
			return k, true
		}
	}
	return key{}, false
}

// Keys returns the known keys, in display order.
func Keys() []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.name
	}
	return out
}

// Help returns one line saying what a key means ("" for an unknown key).
func Help(name string) string {
	k, _ := lookup(name)
	return k.help
}

// EnvOverride returns the environment variable that overrides a key, if any.
func EnvOverride(name string) string {
	k, _ := lookup(name)
	return k.env
}

func checkCID(v string) (string, error) {
	if err := api.CheckCID(v); err != nil {
		return "", err
	}
	return v, nil
}

// CheckAPIURL accepts what api.ParseControlURL does, http:// included: the
// config may name a control run with --insecure-http, but every command
// that talks to it refuses http:// unless run with --insecure-http itself.
func CheckAPIURL(v string) (string, error) {
	u, err := api.ParseControlURL(v, true)
	if err != nil {
		return "", fmt.Errorf("invalid api-url: %w", err)
	}
	return u, nil
}

func checkCAFile(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if strings.ContainsRune(v, 0) {
		return "", fmt.Errorf("invalid ca-file %q", v)
	}
	abs, err := filepath.Abs(v)
	if err != nil {
		return "", fmt.Errorf("invalid ca-file %q: %w", v, err)
	}
	return abs, nil
}

// Config is the parsed file: known keys only, every value checked.
type Config struct {
	values map[string]string
}

// Get returns a key's value in the file ("" when unset).
func (c *Config) Get(name string) string { return c.values[name] }

// Set checks and stores a value; an empty value unsets the key. An unknown
// key or a bad value is refused and changes nothing.
func (c *Config) Set(name, value string) error {
	k, ok := lookup(name)
	if !ok {
		return unknownKey(name)
	}
	if value == "" {
		delete(c.values, name)
		return nil
	}
	v, err := k.check(value)
	if err != nil {
		return err
	}
	if c.values == nil {
		c.values = map[string]string{}
	}
	c.values[name] = v
	return nil
}

// Unset removes a key.
func (c *Config) Unset(name string) error {
	if _, ok := lookup(name); !ok {
		return unknownKey(name)
	}
	delete(c.values, name)
	return nil
}

func unknownKey(name string) error {
	return fmt.Errorf("unknown config key %q (known keys: %s)", name, strings.Join(Keys(), ", "))
}

// Parse reads a config file's contents. An empty file is an empty config.
func Parse(b []byte) (*Config, error) {
	c := &Config{values: map[string]string{}}
	if len(bytes.TrimSpace(b)) == 0 {
		return c, nil
	}
	var raw map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if raw == nil {
		return nil, errors.New("not a JSON object")
	}
	if d.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	slices.Sort(names) // report the same first error every time
	for _, n := range names {
		s, ok := raw[n].(string)
		if !ok {
			return nil, fmt.Errorf("key %q: want a string", n)
		}
		if err := c.Set(n, s); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Marshal returns the file's contents: indented JSON with sorted keys.
func (c *Config) Marshal() []byte {
	b, _ := json.MarshalIndent(c.values, "", "  ") // map[string]string cannot fail
	return append(b, '\n')
}

// Values returns a copy of the set keys.
func (c *Config) Values() map[string]string {
	out := make(map[string]string, len(c.values))
	for k, v := range c.values {
		out[k] = v
	}
	return out
}

// Path returns the config file's path: $RUNOS_CONFIG, else
// <user config dir>/runos/config.json.
func Path(getenv func(string) string, userConfigDir func() (string, error)) (string, error) {
	if p := getenv(EnvConfig); p != "" {
		return p, nil
	}
	d, err := userConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory: %w (set %s to a file path)", err, EnvConfig)
	}
	return filepath.Join(d, "runos", "config.json"), nil
}

// Load reads the file at path; a missing file is an empty config.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{values: map[string]string{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w (fix or remove it)", path, err)
	}
	return c, nil
}

// Save writes the file atomically (a temporary file in the same directory,
// synced, then renamed over the old one) with mode 0600, creating its
// directory 0700, so a crash never leaves half a file.
func (c *Config) Save(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	if err := atomicfile.WriteFile(path, c.Marshal(), 0o600); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	return nil
}

// Effective is the configuration after environment overrides.
type Effective struct {
	CID    string
	APIURL string
	CAFile string
	MTU    int // 0: the default
	// Source says where each value came from: "env RUNOS_API_URL", "config", "".
	Source map[string]string
}

// Resolve applies the environment overrides to c. Overrides are checked
// like file values, so a bad RUNOS_API_URL is reported by name.
func Resolve(c *Config, getenv func(string) string) (*Effective, error) {
	e := &Effective{Source: map[string]string{}}
	for _, k := range keys {
		v, src := c.Get(k.name), ""
		if v != "" {
			src = "config"
		}
		if k.env != "" {
			if ev := getenv(k.env); ev != "" {
				cv, err := k.check(ev)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", k.env, err)
				}
				v, src = cv, "env "+k.env
			}
		}
		e.Source[k.name] = src
		switch k.name {
		case KeyCID:
			e.CID = v
		case KeyAPIURL:
			e.APIURL = v
		case KeyCAFile:
			e.CAFile = v
		case KeyMTU:
			e.MTU, _ = strconv.Atoi(v) // checked when set and when read
		}
	}
	return e, nil
}
