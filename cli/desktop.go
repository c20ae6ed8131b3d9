package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/installer"
	"github.com/runos/vpn/platform"
)

func (a *app) desktopCmd() *cobra.Command {
	return a.group("desktop", "RunOS Desktop, the menu-bar app over the VPN service",
		`RunOS Desktop is a menu-bar (system tray) app over the same VPN service:
its toggle runs vpn up and vpn down, and each cluster row connects or
disconnects that cluster. At login it reconnects silently and never opens a
browser; when a fresh sign-in is needed it stays disconnected until you sign
in from the toggle or the CLI.`,
		a.desktopInstallCmd(),
		a.desktopUninstallCmd(),
	)
}

func (a *app) desktopInstallCmd() *cobra.Command {
	var o installer.DesktopOptions
	var asJSON bool
	c := &cobra.Command{
		Use:   "install",
		Short: "Add RunOS Desktop for you and start it at login",
		Long: `Add RunOS Desktop for the current user (run it as yourself, not ` + platform.AdminHow + `)
and make it start at login with --at-login:

  macOS    RunOS Desktop.app in /Applications and a LaunchAgent (it starts now too)
  Linux    ~/.local/bin/runos-desktop, an application entry and an XDG
           autostart entry (~/.config/autostart/runos-desktop.desktop)
  Windows  %LOCALAPPDATA%\Programs\RunOS\runos-desktop.exe and a value in
           your Run key (HKCU\Software\Microsoft\Windows\CurrentVersion\Run)

It installs the runos-desktop that make build puts next to runos in bin/,
or the program given with --from. RunOS Desktop needs the VPN service:
` + platform.AdminCommand("vpn install") + `.`,
		Example: `  bin/runos desktop install
  runos desktop install --from ~/Downloads/runos-desktop`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			o.Progress = a.env.Stderr
			res, err := installer.InstallDesktop(o)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, res)
			}
			fmt.Fprintf(a.env.Stdout, "Installed RunOS Desktop at %s; it starts at login (%s).\n", res.Program, res.LoginItem)
			if !res.Started {
				fmt.Fprintf(a.env.Stdout, "Start it now: %s\n", res.Program)
			}
			return nil
		}),
	}
	c.Flags().StringVar(&o.From, "from", "", "the runos-desktop program to install (default: the one next to runos)")
	c.Flags().StringVar(&o.Applications, "applications", "", "macOS: where the app bundle goes (default /Applications)")
	c.Flags().BoolVar(&asJSON, "json", false, "print what was installed as JSON")
	return c
}

func (a *app) desktopUninstallCmd() *cobra.Command {
	var o installer.DesktopOptions
	var asJSON bool
	c := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove RunOS Desktop and its login item",
		Long: `Remove what runos desktop install added for the current user: the login
item, the program (and on macOS the app bundle, quitting the app). The VPN
service is not touched.`,
		Example: `  runos desktop uninstall`,
		Args:    exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			o.Progress = a.env.Stderr
			res, err := installer.UninstallDesktop(o)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, res)
			}
			if len(res.Removed) == 0 {
				fmt.Fprintln(a.env.Stdout, "RunOS Desktop was not installed for you; nothing to remove.")
				return nil
			}
			fmt.Fprintln(a.env.Stdout, "Removed RunOS Desktop and its login item.")
			return nil
		}),
	}
	c.Flags().StringVar(&o.Applications, "applications", "", "macOS: where the app bundle is (default /Applications)")
	c.Flags().BoolVar(&asJSON, "json", false, "print what was removed as JSON")
	return c
}
