// Package cli is the `runos` command line: the user's VPN verbs (vpn up,
// connect, status, down, devices), the daemon entry point (vpnd), the
// user's config, the operator's sign-in and the operator verbs against
// runos-control (clusters, nodes, services wireguard, devices, sessions,
// tokens, audit).
//
// Everything the commands touch outside the process (output streams,
// environment, clock, config directory, browser, keystore, the daemon's
// runner) comes in through Env, so the real cobra tree runs in tests against
// a fake daemon socket and a test control server.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/auth"
	"github.com/runos/vpn/platform"
)

// Exit codes of the runos command.
const (
	ExitOK    = 0
	ExitError = 1 // the command ran and failed
	ExitUsage = 2 // bad flags or arguments: nothing was attempted
)

// Keystore keeps the operator credential (auth.Keystore satisfies it).
type Keystore interface {
	Get(account string) (string, error) // auth.ErrNotFound when absent
	Set(account, secret string) error
	Delete(account string) error
}

// Env is everything the commands use from outside the process.
type Env struct {
	// Stdin is where questions are answered (runos vpn up's choice of
	// cluster); it is asked only when it and Stderr are terminals. `runos
	// policy set -` reads the document from it.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	Now            func() time.Time
	UserConfigDir  func() (string, error)
	// IsTerminal reports whether w is an interactive terminal: spinners are
	// drawn only there, plain progress lines otherwise.
	IsTerminal func(w io.Writer) bool
	// Opener opens sign-in URLs in the browser; nil means
	// auth.SystemOpener(Getenv) ($BROWSER, else pkg/browser).
	Opener auth.Opener
	// Keystore opens the operator credential store with its 0600 fallback
	// file; nil means auth.OpenKeystore("runos", fallbackPath).
	Keystore func(fallbackPath string) Keystore
	// Daemon runs `runos vpnd`; nil means the real daemon.
	Daemon Daemon

	// signIn runs a sign-in flow; nil means (*auth.Flow).SignIn. Tests of
	// this package replace it where no authorization server runs.
	signIn func(ctx context.Context, f *auth.Flow, noBrowser bool) (*auth.Token, error)
}

// OSEnv is the real environment of the process.
func OSEnv() Env {
	return Env{
		Stdin:         os.Stdin,
		Stdout:        os.Stdout,
		Stderr:        os.Stderr,
		Getenv:        os.Getenv,
		Now:           time.Now,
		UserConfigDir: os.UserConfigDir,
		IsTerminal:    isTerminal,
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// usageError marks a mistake in the command line: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// quietExit ends a command that said all it had to say with an exit code
// other than 0: `runos policy test` answering deny, for scripts.
type quietExit struct{ code int }

func (e quietExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Main runs the runos command with args (without the program name) and
// returns the process exit code. Errors go to env.Stderr with their context.
func Main(ctx context.Context, args []string, env Env) int {
	a := newApp(env)
	root := a.rootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	if cmd == nil {
		cmd = root
	}
	var quiet quietExit
	if errors.As(err, &quiet) {
		return quiet.code
	}
	fmt.Fprintf(a.env.Stderr, "runos: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) || !a.ran {
		// cobra's own errors (unknown flag, missing argument, flag groups)
		// arrive before any RunE started: they are usage errors too.
		fmt.Fprintf(a.env.Stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return ExitUsage
	}
	return ExitError
}

// Command is runos's command tree as Main runs it, for what is generated
// from it without running it: the man pages and shell completions the
// packages ship (packaging/), so that runos help stays their one source.
func Command() *cobra.Command { return newApp(Env{}).rootCmd() }

// app is one run of the command tree.
type app struct {
	env Env
	ran bool // a command's RunE started: later errors are not usage errors

	socket       string // --socket
	insecureHTTP bool   // --insecure-http: control may be http://

	versionWarned bool // the daemon's other version was told (warnDaemonVersion)
}

func newApp(env Env) *app {
	def := OSEnv()
	if env.Stdout == nil {
		env.Stdout = def.Stdout
	}
	if env.Stderr == nil {
		env.Stderr = def.Stderr
	}
	if env.Getenv == nil {
		env.Getenv = def.Getenv
	}
	if env.Now == nil {
		env.Now = def.Now
	}
	if env.UserConfigDir == nil {
		env.UserConfigDir = def.UserConfigDir
	}
	if env.IsTerminal == nil {
		env.IsTerminal = def.IsTerminal
	}
	if env.Opener == nil {
		env.Opener = auth.SystemOpener(env.Getenv)
	}
	if env.Keystore == nil {
		env.Keystore = func(p string) Keystore { return auth.OpenKeystore("runos", p) }
	}
	if env.signIn == nil {
		env.signIn = defaultSignIn
	}
	if env.Daemon == nil {
		env.Daemon = realDaemon{}
	}
	return &app{env: env}
}

// run wraps a command body so that Main can tell usage errors (raised by
// cobra before any body runs) from failures.
func (a *app) run(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		a.ran = true
		return fn(cmd, args)
	}
}

// group makes a command that only holds subcommands: without arguments it
// shows its help, and an unknown subcommand is a usage error (cobra would
// otherwise print the help and exit 0).
func (a *app) group(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usageError{errors.New(msg)}
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.SuggestionsMinimumDistance = 2 // cobra applies its default only on the root
	c.AddCommand(subs...)
	return c
}

func (a *app) rootCmd() *cobra.Command {
	root := a.group("runos", "RunOS: clusters, nodes and the user VPN",
		`runos reaches your RunOS clusters over the user-access VPN and manages
the clusters' VPN servers.

On your machine (once: `+platform.AdminCommand("vpn install")+`):
  runos vpn up               sign in (browser) and connect your default cluster
  runos vpn connect <cid>    reach another cluster too
  runos vpn status           the tunnel, the session and each cluster
  runos vpn down             disconnect and end the session

As an operator (after runos login, or with RUNOS_TOKEN):
  runos clusters list
  runos nodes list --cid ky3
  runos services wireguard add --cid ky3 --target-node-id n1 --name vpn --follow
  runos devices list --cid ky3          who is on the VPN
  runos devices revoke <id>             cut a device off within a second
  runos audit                           who changed what
  runos policy get|set|test             who may reach what (runos groups)

Set a default cluster so you can drop --cid:  runos config set cid ky3`,
		a.vpnCmd(),
		a.desktopCmd(),
		a.vpndCmd(),
		a.configCmd(),
		a.loginCmd(),
		a.logoutCmd(),
		a.clustersCmd(),
		a.nodesCmd(),
		a.servicesCmd(),
		a.devicesCmd(),
		a.sessionsCmd(),
		a.tokensCmd(),
		a.usersCmd(),
		a.groupsCmd(),
		a.policyCmd(),
		a.auditCmd(),
		a.versionCmd(),
	)
	root.PersistentFlags().BoolVar(&a.insecureHTTP, api.FlagInsecureHTTP, false,
		"allow a plain-HTTP control URL (tests only: tokens would travel in clear text); runos vpnd: accept sessions of such a control")
	root.Args = nil // cobra's own check for the root: unknown commands with suggestions
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetOut(a.env.Stdout)
	root.SetErr(a.env.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	return root
}
