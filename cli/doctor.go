package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/installer"
	"github.com/runos/vpn/platform"
)

// runos vpn doctor: every link between this machine and a cluster's
// services checked in order, each printed as it finishes with ✓ (fine),
// ! (works, but worth knowing) or ✗ (broken), a one-line finding and, for
// anything not ✓, the command or action that fixes it, in the product
// docs' words where they give them. The checks are in doctorchecks.go,
// what they touch outside the process (the daemon, the service manager,
// control, routes, the resolver, the network) in doctorsys.go.

// Check verdicts (JSON).
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
)

// checkResult is one check's verdict: `doctor --json` gives a list of them.
type checkResult struct {
	ID      string `json:"id"`     // e.g. daemon, session, ky3.udp
	Status  string `json:"status"` // ok, warn or fail
	Finding string `json:"finding"`
	Fix     string `json:"fix,omitempty"` // what to do; "" for ok
}

func (c checkResult) mark() string {
	switch c.Status {
	case checkOK:
		return "✓"
	case checkWarn:
		return "!"
	}
	return "✗"
}

// doctorReport is `runos vpn doctor --json`.
type doctorReport struct {
	OK     bool          `json:"ok"` // every check ✓ or !
	Checks []checkResult `json:"checks"`
}

type doctorFlags struct {
	cid     string
	json    bool
	outside string
	service string // the service's name (hidden: side-by-side installs in tests)
}

func (a *app) vpnDoctorCmd() *cobra.Command {
	var f doctorFlags
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check every link to your clusters and say what to fix",
		Long: `Check, in order, everything between this machine and your clusters'
services, and print each check as it finishes: ✓ fine, ! works but worth
knowing, ✗ broken, with a one-line finding and, for anything not ✓, the
command or action that fixes it.

  the daemon: running, answering on its socket, the same version as this
    runos; the system service installed and started at boot; whether you
    may steer it or only read;
  the session: signed in, as whom, the time left; control reachable, and
    this machine's clock against control's;
  each connected cluster (or --cid): its VPN node and endpoint, private or
    public (a public address seen from your own network may not hairpin),
    a fresh WireGuard handshake over UDP (not a ping), the path, the last
    handshake, the route to the cluster's subnet through the tunnel and
    nothing shadowing it (another VPN's 100.64.0.0/10 included), the
    cluster's name resolving through this machine's resolver to its VPN
    address, and its HTTPS on 443 answering through the tunnel;
  split DNS: the mode the daemon chose and why, and whether another program
    (NetworkManager, a DHCP client, resolvconf) rewrote the resolver;
  a browser: Chrome's prompt for the local network, which cluster pages
    wait on until you choose Allow.

It exits 0 when every check is ✓ or !, 1 otherwise. --json prints each
check's id, status (ok, warn, fail), finding and fix.`,
		Example: `  runos vpn doctor
  runos vpn doctor --cid ky3
  runos vpn doctor --json | jq '.checks[] | select(.status == "fail")'`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if f.cid != "" {
				if err := cidArg(f.cid); err != nil {
					return err
				}
			}
			rep := a.doctor(cmd.Context(), f, a.doctorSys(f.service))
			if f.json {
				if err := printJSON(a.env.Stdout, rep); err != nil {
					return err
				}
			}
			if !rep.OK {
				return errDoctorFailed
			}
			return nil
		}),
	}
	c.Flags().StringVar(&f.cid, "cid", "", "check only this cluster (default: every cluster you connected)")
	c.Flags().BoolVar(&f.json, "json", false, "print the checks as JSON")
	c.Flags().StringVar(&f.outside, "outside-name", "", "a name outside every cluster that must still resolve (default: control's host name, else example.com)")
	c.Flags().StringVar(&f.service, "service-name", installer.DefaultName, "the service's name")
	_ = c.Flags().MarkHidden("service-name")
	return c
}

// errDoctorFailed ends a doctor run that found something broken: exit 1,
// the checks have said what.
var errDoctorFailed = fmt.Errorf("some checks failed (✗): see the fixes above")

// doctorRun collects the checks and prints each as it finishes.
type doctorRun struct {
	w      io.Writer // nil with --json: nothing printed until the end
	checks []checkResult
}

func (r *doctorRun) add(c checkResult) {
	r.checks = append(r.checks, c)
	if r.w == nil {
		return
	}
	fmt.Fprintf(r.w, "%s %-16s %s\n", c.mark(), c.ID, c.Finding)
	if c.Status != checkOK && c.Fix != "" {
		fmt.Fprintf(r.w, "  %-16s fix: %s\n", "", c.Fix)
	}
}

func (r *doctorRun) ok(id, format string, args ...any) {
	r.add(checkResult{ID: id, Status: checkOK, Finding: fmt.Sprintf(format, args...)})
}

func (r *doctorRun) warn(id, fix, format string, args ...any) {
	r.add(checkResult{ID: id, Status: checkWarn, Finding: fmt.Sprintf(format, args...), Fix: fix})
}

func (r *doctorRun) fail(id, fix, format string, args ...any) {
	r.add(checkResult{ID: id, Status: checkFail, Finding: fmt.Sprintf(format, args...), Fix: fix})
}

func (r *doctorRun) report() *doctorReport {
	rep := &doctorReport{OK: true, Checks: r.checks}
	for _, c := range r.checks {
		if c.Status == checkFail {
			rep.OK = false
		}
	}
	return rep
}

// doctor runs every check in order against sys.
func (a *app) doctor(ctx context.Context, f doctorFlags, sys *doctorSys) *doctorReport {
	run := &doctorRun{}
	if !f.json {
		run.w = a.env.Stdout
	}
	d := &doctorCtx{a: a, sys: sys, run: run, flags: f, now: a.env.Now}
	d.checkDaemon(ctx)
	if d.st != nil {
		d.checkSession(ctx)
		for _, cs := range d.clusters() {
			d.checkCluster(ctx, cs)
		}
		d.checkOutsideName(ctx)
		d.checkDNSPlumbing(ctx)
	}
	d.checkBrowser()
	rep := run.report()
	if run.w != nil {
		fails, warns := 0, 0
		for _, c := range rep.Checks {
			switch c.Status {
			case checkFail:
				fails++
			case checkWarn:
				warns++
			}
		}
		switch {
		case fails > 0:
			fmt.Fprintf(run.w, "\n%d of %d checks failed (✗), %d to know about (!).\n", fails, len(rep.Checks), warns)
		case warns > 0:
			fmt.Fprintf(run.w, "\nNothing is broken; %d of %d checks are worth knowing about (!).\n", warns, len(rep.Checks))
		default:
			fmt.Fprintf(run.w, "\nAll %d checks passed.\n", len(rep.Checks))
		}
	}
	return rep
}

// adminCmd is a runos command as an administrator runs it on this OS.
func adminCmd(args string) string { return platform.AdminCommand(args) }

// ago says how long before now t was, for findings.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmtDuration(now.Sub(t).Round(time.Second)) + " ago"
}

func quoteList(s []string) string { return strings.Join(s, ", ") }
