package cli

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
)

// expiryWarning is how long before a sign-in lapses status starts warning.
const expiryWarning = time.Hour

func (a *app) vpnStatusCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the tunnel, the session and each cluster",
		Long: `Show what the daemon holds: the session (who, until when), the tunnel
wg1, split DNS, and each cluster with its state, whether its peer is up
(peerUp: the VPN server answers, read from the tunnel, not assumed: a
WireGuard handshake within the last 180 s, since the last network change or
wake, and nothing sent to it left unanswered for 15 s; when it stops
answering the cluster says so, e.g. "no answer from n1 at 10.77.0.21:32768
for 17 s"), its path (direct: WireGuard over UDP; relay: over the node's
HTTPS relay, where the network lets no UDP through), the last handshake,
and the VPN server it dials.

During the last hour of a sign-in it warns; run runos vpn up to renew.
A sign-out or disconnect control did not hear yet (it was unreachable) is
shown as pending at control: the daemon retries until control answers.
The Control line is the control server the daemon follows (only root and
the operator recorded at install may point it at another). A user who may
only read (not root, the operator recorded at install or a member of the
runos group) is told so, with the command that grants access.
--json prints the daemon's status document unchanged, for scripts.`,
		Example: `  runos vpn status
  runos vpn status --json | jq '.clusters[] | {cid, peerUp, path}'`,
		Args: exactArgs(),
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			st, err := a.daemon().Status(cmd.Context())
			if err != nil {
				return fmt.Errorf("vpn status: %w", err)
			}
			a.warnDaemonVersion(st.Version)
			if asJSON {
				return printJSON(a.env.Stdout, st)
			}
			local, _ := localAddrs() // unknown: nothing is said about private addresses
			renderStatus(a.env.Stdout, st, a.env.Now(), local)
			return nil
		}),
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the daemon's status as JSON")
	return c
}

// sessionLines describes the session, with the expiry warning in the last
// hour: by this command's clock, or when the daemon warns (expiring) by its.
func sessionLines(s localapi.Session, control string, expiring bool, now time.Time) []string {
	var lines []string
	switch {
	case s.State == localapi.SessionRevoked:
		l := "revoked"
		if !s.RevokedAt.IsZero() {
			l += " at " + fmtTime(s.RevokedAt, now)
		}
		lines = append(lines, l+": this device was removed from RunOS and its key is refused",
			"run `runos vpn up` to sign in again with a fresh key (your clusters reconnect)")
		return lines
	case s.State == localapi.SessionExpired || s.State == localapi.SessionSignedIn && !s.ExpiresAt.IsZero() && !now.Before(s.ExpiresAt):
		l := "expired"
		if !s.ExpiresAt.IsZero() {
			l += " at " + fmtTime(s.ExpiresAt, now)
		}
		lines = append(lines, l+"; run `runos vpn up` to sign in again")
	case s.State == localapi.SessionSignedIn:
		l := "signed in"
		if s.APIURL != "" && s.APIURL != control {
			l += " to " + s.APIURL // a daemon that does not say which control it follows
		}
		if s.User != "" {
			l += " as " + s.User
		}
		if !s.ExpiresAt.IsZero() {
			left := s.ExpiresAt.Sub(now)
			l += fmt.Sprintf(" until %s (%s left)", fmtTime(s.ExpiresAt, now), fmtDuration(left))
			lines = append(lines, l)
			if left <= expiryWarning || expiring {
				lines = append(lines, fmt.Sprintf("warning: your sign-in expires in %s; run `runos vpn up` to renew", fmtDuration(left)))
			}
		} else {
			lines = append(lines, l)
		}
	default:
		lines = append(lines, "signed out; run `runos vpn up` to sign in")
	}
	if s.Error != "" {
		lines = append(lines, "error: "+s.Error)
	}
	return lines
}

// accessLines says, for a user the daemon lets only read, so and how to get
// access (nothing for one who may steer it, or from a daemon that does not
// say).
func accessLines(a *localapi.Access) []string {
	if a == nil || a.Control {
		return nil
	}
	hint := a.Hint
	if hint == "" {
		hint = access.GrantHint()
	}
	return []string{"you may only read the VPN status; to change it, " + hint}
}

// readOnlyErr is the daemon's refusal, known from its status before asking:
// `vpn up` stops before a browser sign-in the daemon would not take.
func readOnlyErr(st *localapi.Status) error {
	if a := st.Access; a != nil && !a.Control {
		return &api.Error{Status: 403, Code: localapi.CodeForbidden, Message: a.Reason, Hint: a.Hint}
	}
	return nil
}

// tunnelLines says whether the tunnel carries anything. The daemon keeps
// wg1 (and its address) between sessions, so its interface being up is
// not the user's "up": after runos vpn down, with no cluster connected or
// connecting, the tunnel is down, and the line says why.
func tunnelLines(st *localapi.Status) []string {
	t := st.Tunnel
	name := t.Interface
	if name == "" {
		name = "wg1"
	}
	var l string
	switch {
	case !t.Up:
		l = name + " down"
	case !carriesClusters(st.Clusters) && st.Session.State != localapi.SessionSignedIn:
		l = "down: signed out (" + name + " carries nothing until runos vpn up)"
	case !carriesClusters(st.Clusters):
		l = "down: no cluster connected (runos vpn connect <cid>)"
	default:
		l = name + " up"
		if len(t.Addresses) > 0 {
			l += ", " + strings.Join(t.Addresses, ", ")
		}
	}
	lines := []string{l}
	if t.Error != "" {
		lines = append(lines, "error: "+t.Error)
	}
	return lines
}

// carriesClusters: a cluster is connected or being connected.
func carriesClusters(cs []localapi.ClusterStatus) bool {
	for _, c := range cs {
		if c.State == localapi.ClusterConnected || c.State == localapi.ClusterConnecting {
			return true
		}
	}
	return false
}

func dnsLines(d localapi.DNS) []string {
	l := d.Mode
	if l == "" {
		l = "off"
	}
	if d.Reason != "" {
		l += " (" + d.Reason + ")"
	}
	lines := []string{l}
	if d.Error != "" {
		lines = append(lines, "error: "+d.Error)
	}
	return lines
}

// renderStatus is the human form of vpn status.
// local is this machine's addresses, to tell a private ingress out of
// reach (see privateingress.go).
func renderStatus(w io.Writer, st *localapi.Status, now time.Time, local []netip.Prefix) {
	section := func(name string, lines []string) {
		for i, l := range lines {
			if i == 0 {
				fmt.Fprintf(w, "%-9s %s\n", name, l)
			} else {
				fmt.Fprintf(w, "%-9s %s\n", "", l)
			}
		}
	}
	if st.Control != "" {
		section("Control", []string{st.Control})
	}
	section("Session", sessionLines(st.Session, st.Control, hasWarning(st, localapi.WarnSessionExpiring), now))
	section("Access", accessLines(st.Access))
	section("Tunnel", tunnelLines(st))
	section("DNS", dnsLines(st.DNS))
	for _, warn := range otherWarnings(st) {
		fmt.Fprintln(w, "warning: "+warn)
	}
	fmt.Fprintln(w)
	if len(st.Clusters) == 0 {
		fmt.Fprintln(w, "No clusters. Connect one with `runos vpn connect <cid>`.")
		return
	}
	t := newTable(w, "CID", "STATE", "PEERUP", "PATH", "HANDSHAKE", "NODE", "ENDPOINT")
	for _, c := range st.Clusters {
		t.row(c.CID, c.State, yesNo(c.PeerUp), c.Path, fmtAgo(c.LastHandshake, now), c.Server.NodeID, c.Server.Endpoint)
	}
	t.flush()
	for _, c := range st.Clusters {
		switch {
		case c.State == localapi.ClusterConnected && !c.PeerUp && awayFromPrivate(c, local):
			// Not the firewall, and not the relay: the address is private.
			fmt.Fprintf(w, "  %s: %s; %s\n", c.CID, privateIngressWords(c), privateIngressFix(c))
		case c.Path == localapi.PathRelay:
			fmt.Fprintf(w, "  %s: relayed over %s (%s)\n", c.CID, c.Relay, c.PathReason)
		}
		if c.DNS.Server != "" && len(c.DNS.Domains) > 0 {
			fmt.Fprintf(w, "  %s: DNS %s for %s\n", c.CID, c.DNS.Server, strings.Join(c.DNS.Domains, ", "))
		}
		for _, l := range reachLines(c.Reach) {
			fmt.Fprintf(w, "  %s: %s\n", c.CID, l)
		}
		if c.Error != "" {
			fmt.Fprintf(w, "  %s: %s\n", c.CID, c.Error)
		}
		if c.Kept != nil {
			fmt.Fprintf(w, "  %s: %s\n", c.CID, c.Kept.Message)
		}
	}
}

// otherWarnings are the daemon's warnings that the session and DNS lines do
// not already say, decided by code: the session line words the session's
// own (with the time left), and the DNS line shows the DNS error. A code
// this runos does not know is printed as the daemon words it.
func otherWarnings(st *localapi.Status) []string {
	var out []string
	for _, w := range st.Warnings {
		switch {
		case (w.Code == localapi.WarnSessionExpiring || w.Code == localapi.WarnSessionExpired) && st.Session.State != localapi.SessionSignedOut:
		case w.Code == localapi.WarnDNS && st.DNS.Error != "":
		case w.Code == localapi.WarnDeviceRevoked && st.Session.State == localapi.SessionRevoked:
		default:
			out = append(out, w.Message)
		}
	}
	return out
}

// hasWarning reports whether the daemon warns with code.
func hasWarning(st *localapi.Status, code string) bool {
	for _, w := range st.Warnings {
		if w.Code == code {
			return true
		}
	}
	return false
}

// reachLines say what the laptop routes into a cluster beyond its VPN
// server: raw ranges, shadowed ones and by what, the mapped range.
func reachLines(r *localapi.ClusterReach) []string {
	if r == nil {
		return nil
	}
	var out []string
	if len(r.Routed) > 0 {
		l := "routes " + strings.Join(r.Routed, ", ")
		if r.Default {
			l += " (the default cluster)"
		}
		out = append(out, l)
	}
	if len(r.Shadowed) > 0 {
		var sh []string
		for _, s := range r.Shadowed {
			sh = append(sh, s.Prefix+" (by "+s.By+")")
		}
		out = append(out, "shadowed "+strings.Join(sh, ", "))
	}
	if r.Mapped != "" {
		out = append(out, "mapped "+r.Mapped+": every internal range, by the cluster's names")
	}
	for _, x := range r.Refused {
		out = append(out, "refused "+x)
	}
	return out
}
