package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/cli/config"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/localapi"
)

// configPath is the user's config file.
func (a *app) configPath() (string, error) {
	return config.Path(a.env.Getenv, a.env.UserConfigDir)
}

// loadConfig reads the user's config file (a missing one is empty).
func (a *app) loadConfig() (*config.Config, string, error) {
	p, err := a.configPath()
	if err != nil {
		return nil, "", err
	}
	c, err := config.Load(p)
	return c, p, err
}

// effective is the config after the environment overrides.
func (a *app) effective() (*config.Effective, error) {
	c, _, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	return config.Resolve(c, a.env.Getenv)
}

// needAPIURL says how to configure control's URL when there is none.
func needAPIURL(e *config.Effective) error {
	if e.APIURL != "" {
		return nil
	}
	return fmt.Errorf("no control URL configured: run `runos config set api-url https://<control>` or set %s", config.EnvAPIURL)
}

// controlClient is an api.Client for the effective config with token.
func (a *app) controlClient(e *config.Effective, token string) (*api.Client, error) {
	if err := needAPIURL(e); err != nil {
		return nil, err
	}
	c, err := api.NewClient(e.APIURL, token, e.CAFile, api.AllowHTTP(a.insecureHTTP))
	if errors.Is(err, api.ErrPlainHTTP) {
		return nil, fmt.Errorf("%w (api-url from %s)", err, e.Source[config.KeyAPIURL])
	}
	if err != nil {
		src := e.Source[config.KeyCAFile]
		if src == "" {
			src = "config"
		}
		return nil, fmt.Errorf("control client: %w (ca-file from %s)", err, src)
	}
	return c, nil
}

// socketPath is the daemon's socket: --socket, else $RUNOS_VPND_SOCKET,
// else the OS default.
func (a *app) socketPath() string {
	if a.socket != "" {
		return a.socket
	}
	if p := a.env.Getenv(platform.EnvSocket); p != "" {
		return p
	}
	return platform.DefaultSocketPath
}

// daemon is a client of the local API.
func (a *app) daemon() *localapi.Client { return localapi.NewClient(a.socketPath()) }

func (a *app) addSocketFlag(c *cobra.Command) {
	c.PersistentFlags().StringVar(&a.socket, "socket", "",
		"the daemon's local API socket (default $"+platform.EnvSocket+", else "+platform.DefaultSocketPath+")")
}

// credentialsPath is the 0600 fallback file of the operator keystore,
// next to the config file.
func (a *app) credentialsPath() (string, error) {
	p, err := a.configPath()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(p), "credentials.json"), nil
}

// printJSON writes v as indented JSON, the --json form of every command.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJSONList prints a list as printJSON does: [] when it is empty,
// never null, so that scripts can always iterate.
func printJSONList[T any](w io.Writer, list []T) error {
	if list == nil {
		list = []T{}
	}
	return printJSON(w, list)
}

// table writes aligned columns: the header, then one row per call.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() { _ = t.tw.Flush() }

func yesNo(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// cidArg validates a cid given on the command line before anything is sent.
func cidArg(s string) error {
	if err := api.CheckCID(s); err != nil {
		return usageError{err}
	}
	return nil
}

// exactArgs is cobra.ExactArgs with names, so the error says what is missing.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		if len(args) < len(names) {
			return usagef("missing %s", strings.Join(names[len(args):], " "))
		}
		return usagef("too many arguments: want %s, got %q", strings.Join(names, " "), args)
	}
}
