package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/cli/config"
)

func keysHelp() string {
	var b strings.Builder
	for _, k := range config.Keys() {
		fmt.Fprintf(&b, "  %-8s %s", k, config.Help(k))
		if env := config.EnvOverride(k); env != "" {
			fmt.Fprintf(&b, " [overridden by $%s]", env)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (a *app) configCmd() *cobra.Command {
	return a.group("config", "Read and change your settings (default cluster, control URL, CA)",
		`Your settings live in a JSON file: $RUNOS_CONFIG, else
<user config dir>/runos/config.json (0600). Keys:

`+keysHelp()+`
Values are checked before anything is written; an unknown key or a bad
value changes nothing.`,
		a.configSetCmd(), a.configGetCmd(), a.configUnsetCmd(), a.configListCmd())
}

func (a *app) configSetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Set a key",
		Long:  "Set a key in your config file. Keys:\n\n" + keysHelp(),
		Example: `  runos config set cid ky3
  runos config set api-url https://control.example.com
  runos config set ca-file ~/lab/ca.pem`,
		Args: exactArgs("KEY", "VALUE"),
		RunE: a.run(func(_ *cobra.Command, args []string) error {
			c, path, err := a.loadConfig()
			if err != nil {
				return err
			}
			if err := c.Set(args[0], args[1]); err != nil {
				return usageError{fmt.Errorf("config set: %w", err)}
			}
			if err := c.Save(path); err != nil {
				return err
			}
			if env := config.EnvOverride(args[0]); env != "" && a.env.Getenv(env) != "" {
				fmt.Fprintf(a.env.Stderr, "note: $%s is set and overrides %s\n", env, args[0])
			}
			return nil
		}),
	}
}

func (a *app) configUnsetCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "unset KEY",
		Short:   "Remove a key",
		Example: `  runos config unset cid`,
		Args:    exactArgs("KEY"),
		RunE: a.run(func(_ *cobra.Command, args []string) error {
			c, path, err := a.loadConfig()
			if err != nil {
				return err
			}
			if err := c.Unset(args[0]); err != nil {
				return usageError{fmt.Errorf("config unset: %w", err)}
			}
			return c.Save(path)
		}),
	}
}

// setting is one key as config get and list show it.
type setting struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"` // "config", "env RUNOS_API_URL" or "" (unset)
}

func (a *app) settings() ([]setting, error) {
	e, err := a.effective()
	if err != nil {
		return nil, err
	}
	var out []setting
	for _, k := range config.Keys() {
		v := map[string]string{config.KeyCID: e.CID, config.KeyAPIURL: e.APIURL, config.KeyCAFile: e.CAFile}[k]
		out = append(out, setting{Key: k, Value: v, Source: e.Source[k]})
	}
	return out, nil
}

func (a *app) configGetCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "get KEY",
		Short: "Print a key's value",
		Long: `Print a key's effective value: the environment variable that overrides it
when set, else the config file's value (an empty line when unset).`,
		Example: `  runos config get cid`,
		Args:    exactArgs("KEY"),
		RunE: a.run(func(_ *cobra.Command, args []string) error {
			ss, err := a.settings()
			if err != nil {
				return err
			}
			for _, s := range ss {
				if s.Key != args[0] {
					continue
				}
				if asJSON {
					return printJSON(a.env.Stdout, s)
				}
				fmt.Fprintln(a.env.Stdout, s.Value)
				return nil
			}
			return usagef("config get: unknown config key %q (known keys: %s)", args[0], strings.Join(config.Keys(), ", "))
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print {key, value, source} as JSON")
	return c
}

func (a *app) configListCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "list",
		Short:   "Print every key with its value and where it comes from",
		Example: `  runos config list`,
		Args:    exactArgs(),
		RunE: a.run(func(_ *cobra.Command, _ []string) error {
			ss, err := a.settings()
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, ss)
			}
			t := newTable(a.env.Stdout, "KEY", "VALUE", "SOURCE")
			for _, s := range ss {
				t.row(s.Key, s.Value, s.Source)
			}
			t.flush()
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the settings as JSON")
	return c
}
