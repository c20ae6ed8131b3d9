// Command runos-desktop is RunOS Desktop, the menu-bar / system-tray app
// over the RunOS VPN daemon: a toggle that runs `runos vpn up` / `down`, a
// row per cluster, and a silent reconnect at login. It runs as the user;
// the daemon (`runos vpnd`, installed once by `runos vpn install` as root) does the
// privileged work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"syscall"
	"time"

	"github.com/runos/vpn/cli/config"
	"github.com/runos/vpn/desktop/app"
	"github.com/runos/vpn/desktop/instance"
	"github.com/runos/vpn/desktop/menu"
	"github.com/runos/vpn/desktop/tray"
	"github.com/runos/vpn/internal/version"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/localapi"
)

// usage names this OS's install command, so it is built, not a constant.
func usage() string {
	return `runos-desktop: RunOS Desktop, the menu-bar / system-tray app of RunOS VPN.

Usage:
  runos-desktop [--at-login] [--socket PATH] [--console-url URL] [--log-file FILE] [-v]

The menu shows who is signed in and until when, a toggle ("Connect" runs
what "runos vpn up" does, signing in in your browser when needed;
"Disconnect" runs "runos vpn down"), one row per cluster you can reach
(checked = connected; click to connect or disconnect it), "Open RunOS
console" and "Quit". It follows the daemon live and needs it running:
install it once with "` + platform.AdminCommand("vpn install") + `".

Only one RunOS Desktop runs per user: launching it again asks the running
one to show itself and exits.

With --at-login (what "runos desktop install" registers to run at login) it
reconnects silently when your session is still valid and you were
connected, and never opens a browser: when a fresh sign-in is needed it
stays disconnected until you choose "Sign in…" or run "runos vpn up".

Environment: RUNOS_VPND_SOCKET (the daemon's socket), RUNOS_CONFIG (the
config file runos config writes), RUNOS_API_URL and RUNOS_CA_FILE (override
api-url and ca-file), BROWSER (the command that opens sign-in pages).

Flags:
`
}

type options struct {
	atLogin    bool
	socket     string
	consoleURL string
	logFile    string
	verbose    bool
	version    bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("runos-desktop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.atLogin, "at-login", false, "started by the login item: reconnect silently, never open a browser")
	fs.StringVar(&o.socket, "socket", platform.SocketPath(), "the daemon's local API socket (or $"+platform.EnvSocket+")")
	fs.StringVar(&o.consoleURL, "console-url", "", "page \"Open RunOS console\" opens (default: control's URL)")
	fs.StringVar(&o.logFile, "log-file", "", "append logs to FILE (default: stderr; with --at-login, where nobody sees stderr, <user cache dir>/runos/desktop.log)")
	fs.BoolVar(&o.verbose, "v", false, "log debug detail")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (see runos-desktop --help)", fs.Arg(0))
	}
	return o, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "runos-desktop:", err)
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, "runos-desktop", version.String())
		return 0
	}
	logOut := stderr
	if o.logFile == "" && o.atLogin {
		if d, err := os.UserCacheDir(); err == nil {
			o.logFile = filepath.Join(d, "runos", "desktop.log")
		}
	}
	if o.logFile != "" {
		f, err := openLog(o.logFile)
		if err != nil {
			fmt.Fprintln(stderr, "runos-desktop:", err)
			return 1
		}
		defer f.Close()
		logOut = f
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))

	if err := tray.Check(); err != nil {
		fmt.Fprintln(stderr, "runos-desktop:", err)
		return 1
	}
	var inst *instance.Instance
	if addr, err := instance.DefaultAddr(); err != nil {
		log.Warn("running without the single-instance guard", "err", err)
	} else if inst, err = instance.Acquire(addr, log); errors.Is(err, instance.ErrRunning) {
		fmt.Fprintln(stdout, err)
		return 0
	} else if err != nil {
		log.Warn("running without the single-instance guard", "err", err)
	}
	if inst != nil {
		defer inst.Close()
	}
	if !tray.HasHost() {
		log.Warn("no system tray is running (no StatusNotifierWatcher on the session bus): the menu is served but nothing shows it; on GNOME enable the AppIndicator extension")
	}

	cfg := appConfig(o, log)
	log.Info("RunOS Desktop starting", "version", version.String(), "socket", o.socket, "atLogin", o.atLogin)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	tray.Run(func() {
		var a *app.App
		// The tray calls back only for enabled items, and nothing is
		// enabled before a's first Render, so a is set by then.
		t := tray.New(func(op menu.Op) { a.Click(op) })
		cfg.Render = t
		a = app.New(cfg)
		go func() { done <- a.Run(ctx) }()
		if inst != nil {
			go inst.Serve(ctx, os.Getpid(), func() { t.Show(log) })
		}
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		go func() {
			select {
			case <-a.Quit():
			case s := <-sigs:
				log.Info("quitting on signal", "signal", s.String())
			case <-ctx.Done():
			}
			tray.Quit()
		}()
	}, cancel)
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Error("stopped", "err", err)
			return 1
		}
	case <-time.After(5 * time.Second):
		log.Warn("operations still running at quit; leaving them to the daemon")
	}
	log.Info("RunOS Desktop quit")
	return 0
}

// maxLog is where the log file starts over, so a login item that runs
// for years never fills the disk.
const maxLog = 1 << 20

func openLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	flags := os.O_CREATE | os.O_APPEND | os.O_WRONLY
	if fi, err := os.Stat(path); err == nil && fi.Size() > maxLog {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return f, nil
}

// appConfig reads the user's config (read-only; a broken file is shown in
// the menu rather than stopping the app) and wires the real side effects.
func appConfig(o options, log *slog.Logger) app.Config {
	cfg := app.Config{
		Daemon:     localapi.NewClient(o.socket),
		Log:        log,
		AtLogin:    o.atLogin,
		ConsoleURL: o.consoleURL,
	}
	if u, err := user.Current(); err == nil {
		cfg.OSUser = u.Username
	}
	eff, err := loadConfig()
	if err != nil {
		log.Warn("user config", "err", err)
		cfg.ConfigErr = err
	}
	cfg.APIURL, cfg.DefaultCID = eff.APIURL, eff.CID
	cfg.SignIn = signIn(eff.CAFile, log)
	cfg.Control = control(eff.CAFile)
	cfg.Open = openURL
	return cfg
}

func loadConfig() (*config.Effective, error) {
	path, err := config.Path(os.Getenv, os.UserConfigDir)
	if err != nil {
		return &config.Effective{}, err
	}
	c, err := config.Load(path)
	if err != nil {
		// The environment still counts when the file is broken.
		eff, _ := config.Resolve(&config.Config{}, os.Getenv)
		if eff == nil {
			eff = &config.Effective{}
		}
		return eff, err
	}
	eff, err := config.Resolve(c, os.Getenv)
	if err != nil {
		return &config.Effective{}, err
	}
	return eff, nil
}
