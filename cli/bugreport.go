package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.zx2c4.com/wireguard/wgctrl"

	"github.com/runos/vpn/cli/reportfile"
	"github.com/runos/vpn/installer"
	"github.com/runos/vpn/platform"
)

// runos vpn bugreport: one .tar.gz with what support needs to see what is
// wrong, every file passed through the redactor (redact.go) first.

// bugreportFiles are the report's files, in the archive's order.
var bugreportFiles = []string{
	"README.txt", "versions.txt", "os.txt", "status.json", "doctor.json", "daemon.log",
	"routes.txt", "addresses.txt", "dns.txt", "wg.txt", "service.txt",
}

func (a *app) vpnBugreportCmd() *cobra.Command {
	var out, service string
	c := &cobra.Command{
		Use:   "bugreport",
		Short: "Write a redacted .tar.gz for support: logs, status, doctor, network",
		Long: `Write one .tar.gz with what support needs to see what is wrong: the
daemon's recent log (it keeps its last few thousand lines in memory), the
status (runos vpn status --json), every check of runos vpn doctor --json,
the versions, the OS, the routes, the addresses, the DNS configuration, the
tunnel as wg show wg1 shows it, and the service's definition.

Nothing secret is in it: no private key, access or operator token, password
or cookie (anything shaped like a key or token is replaced by [REDACTED];
public keys stay). The daemon's log is for those who may steer it: as
another user the report says so instead. It prints the file's path and size.`,
		Example: `  runos vpn bugreport
  runos vpn bugreport -o /tmp/runos-report.tar.gz`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				host, _ := os.Hostname()
				out = fmt.Sprintf("runos-bugreport-%s-%s.tar.gz", safeName(host), a.env.Now().UTC().Format("20060102T150405Z"))
			}
			files := a.bugreport(cmd.Context(), a.doctorSys(service), platformFacts())
			size, err := reportfile.Write(out, bugreportFiles, files, a.env.Now())
			if err != nil {
				return fmt.Errorf("bugreport: %w", err)
			}
			abs, _ := filepath.Abs(out)
			fmt.Fprintf(a.env.Stdout, "Wrote %s (%s). Send it to support; it holds no keys, tokens or passwords.\n", abs, fmtSize(size))
			return nil
		}),
	}
	c.Flags().StringVarP(&out, "output", "o", "", "where to write the report (default runos-bugreport-<host>-<time>.tar.gz here)")
	c.Flags().StringVar(&service, "service-name", installer.DefaultName, "the service's name")
	_ = c.Flags().MarkHidden("service-name")
	return c
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
}

func fmtSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// facts are what the report reads of the machine besides the daemon.
type facts struct {
	OS      func() string
	DNS     func() string
	WG      func(iface string) string
	Service func() (*installer.ServiceStatus, error)
}

func platformFacts() facts {
	return facts{OS: osFacts, DNS: dnsFacts, WG: wgShow}
}

// bugreport gathers the report's files (name → content), redacted.
func (a *app) bugreport(ctx context.Context, sys *doctorSys, fx facts) map[string][]byte {
	files := map[string][]byte{}
	put := func(name, s string) { files[name] = []byte(s) }
	st, stErr := sys.Daemon.Status(ctx)
	keep := []string{}
	if st != nil {
		keep = append(keep, st.Tunnel.PublicKey)
		for _, c := range st.Clusters {
			keep = append(keep, c.Server.PublicKey)
		}
	}

	put("README.txt", fmt.Sprintf("runos vpn bugreport, %s\nFiles: %s\nSecrets (keys, tokens, passwords, cookies) are replaced by %s.\n",
		a.env.Now().UTC().Format(time.RFC3339), strings.Join(bugreportFiles, ", "), redacted))
	v := a.versions(ctx)
	put("versions.txt", jsonText(v))
	put("os.txt", fx.OS())
	if stErr != nil {
		put("status.json", jsonText(map[string]string{"error": stErr.Error()}))
	} else {
		put("status.json", jsonText(st))
	}
	rep := a.doctor(ctx, doctorFlags{json: true}, sys)
	put("doctor.json", jsonText(rep))
	put("daemon.log", a.daemonLog(ctx))
	put("routes.txt", routesText(sys))
	put("addresses.txt", addressesText())
	dns := fx.DNS()
	if st != nil {
		dns = fmt.Sprintf("daemon: mode %s (%s)%s\n\n", st.DNS.Mode, st.DNS.Reason, errSuffix(st.DNS.Error)) + dns
	}
	put("dns.txt", dns)
	iface := "wg1"
	if st != nil && st.Tunnel.Interface != "" {
		iface = st.Tunnel.Interface
	}
	put("wg.txt", fx.WG(iface))
	svcFn := fx.Service
	if svcFn == nil {
		svcFn = sys.Service
	}
	put("service.txt", serviceText(svcFn))

	r := newRedactor(keep...)
	for name, b := range files {
		files[name] = []byte(r.redact(string(b)))
	}
	return files
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return "; error: " + e
}

func jsonText(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "error: " + err.Error()
	}
	return string(b) + "\n"
}

func (a *app) daemonLog(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := a.daemon().Logs(ctx)
	if err != nil {
		return "The daemon's log is not included: " + err.Error() + "\n" +
			"(it is for root, the operator recorded at install and the runos group; the service also keeps it where its manager does)\n"
	}
	head := ""
	if l.Dropped > 0 {
		head = fmt.Sprintf("(%d older lines are no longer kept)\n", l.Dropped)
	}
	return head + strings.Join(l.Lines, "\n") + "\n"
}

func routesText(sys *doctorSys) string {
	rs, err := sys.Routes()
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-44s %-16s %6s %6s\n", "PREFIX", "INTERFACE", "TABLE", "METRIC")
	for _, r := range rs {
		fmt.Fprintf(&b, "%-44s %-16s %6d %6d\n", r.Prefix, r.Interface, r.Table, r.Metric)
	}
	return b.String()
}

func addressesText() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, ifc := range ifs {
		fmt.Fprintf(&b, "%s (index %d, mtu %d, %s)\n", ifc.Name, ifc.Index, ifc.MTU, ifc.Flags)
		as, _ := ifc.Addrs()
		for _, a := range as {
			fmt.Fprintf(&b, "    %s\n", a)
		}
	}
	return b.String()
}

func serviceText(status func() (*installer.ServiceStatus, error)) string {
	s, err := status()
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	out := jsonText(s)
	if s.Text != "" {
		out += "\n--- " + s.Definition + "\n" + s.Text
	}
	return out
}

// osFacts: the OS, its release and the kernel.
func osFacts() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s, %d CPUs, runos built with %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	for _, f := range []string{"/etc/os-release"} {
		if c, err := os.ReadFile(f); err == nil {
			fmt.Fprintf(&b, "\n--- %s\n%s", f, c)
		}
	}
	for _, argv := range [][]string{{"uname", "-a"}, {"sw_vers"}, {"cmd", "/c", "ver"}} {
		if _, err := exec.LookPath(argv[0]); err != nil {
			continue
		}
		out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "\n$ %s\n%s", strings.Join(argv, " "), out)
	}
	return b.String()
}

// dnsFacts: the resolver files and the OS's own account of DNS.
func dnsFacts() string {
	var b strings.Builder
	files := []string{"/etc/resolv.conf"}
	if m, _ := filepath.Glob("/etc/resolver/*"); len(m) > 0 {
		files = append(files, m...)
	}
	for _, f := range files {
		if c, err := os.ReadFile(f); err == nil {
			fmt.Fprintf(&b, "--- %s\n%s\n", f, c)
		}
	}
	for _, argv := range [][]string{{"resolvectl", "status"}, {"scutil", "--dns"}, {"powershell", "-NoProfile", "-Command", "Get-DnsClientNrptPolicy; Get-DnsClientServerAddress"}} {
		if _, err := exec.LookPath(argv[0]); err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, _ := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		cancel()
		fmt.Fprintf(&b, "$ %s\n%s\n", strings.Join(argv, " "), out)
	}
	return b.String()
}

// wgShow is `wg show IFACE` without keys but the public ones: read with
// wgctrl, the private key never touched.
func wgShow(iface string) string {
	c, err := wgctrl.New()
	if err != nil {
		return "wgctrl: " + err.Error() + "\n"
	}
	defer c.Close()
	d, err := c.Device(iface)
	if err != nil {
		return fmt.Sprintf("read %s: %v (reading the tunnel needs administrator rights: run runos vpn bugreport %s)\n", iface, err, platform.AdminHow)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "interface: %s\n  public key: %s\n  private key: (hidden)\n  listening port: %d\n", d.Name, d.PublicKey, d.ListenPort)
	peers := slices.Clone(d.Peers)
	for _, p := range peers {
		fmt.Fprintf(&b, "\npeer: %s\n", p.PublicKey)
		if p.Endpoint != nil {
			fmt.Fprintf(&b, "  endpoint: %s\n", p.Endpoint)
		}
		var ips []string
		for _, n := range p.AllowedIPs {
			ips = append(ips, n.String())
		}
		fmt.Fprintf(&b, "  allowed ips: %s\n", strings.Join(ips, ", "))
		if !p.LastHandshakeTime.IsZero() {
			fmt.Fprintf(&b, "  latest handshake: %s\n", p.LastHandshakeTime.UTC().Format(time.RFC3339))
		}
		fmt.Fprintf(&b, "  transfer: %d B received, %d B sent\n", p.ReceiveBytes, p.TransmitBytes)
		if p.PersistentKeepaliveInterval > 0 {
			fmt.Fprintf(&b, "  persistent keepalive: every %s\n", p.PersistentKeepaliveInterval)
		}
	}
	return b.String()
}
