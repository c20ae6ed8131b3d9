package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/installer"
	"github.com/runos/vpn/internal/version"
	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
)

// The doctor's thresholds.
const (
	skewWarn = 30 * time.Second // the clock off by more: worth knowing
	skewFail = 10 * time.Minute // the daemon lapses sessions by this clock
)

// doctorCtx is one run of the checks.
type doctorCtx struct {
	a     *app
	sys   *doctorSys
	run   *doctorRun
	flags doctorFlags
	now   func() time.Time
	st    *localapi.Status // nil when the daemon does not answer
}

// reconnect is the fix that re-applies a cluster's tunnel and DNS.
func reconnect(cid string) string {
	return fmt.Sprintf("runos vpn disconnect %s && runos vpn connect %s", cid, cid)
}

// checkDaemon: running and answering, the version, the service, access.
func (d *doctorCtx) checkDaemon(ctx context.Context) {
	svc, svcErr := d.sys.Service()
	st, err := d.sys.Daemon.Status(ctx)
	sock := d.a.socketPath()
	if err != nil {
		fix := "install and start it: " + adminCmd("vpn install")
		if svcErr == nil && svc.Installed {
			fix = "start the service " + svc.Service + " (" + serviceStartHint(svc) + "); if it stops again, see its log: runos vpn bugreport"
		}
		if errors.Is(err, localapi.ErrNoDaemon) {
			d.run.fail("daemon", fix, "the RunOS VPN daemon does not answer on %s: it is not running", sock)
		} else {
			d.run.fail("daemon", fix, "the daemon on %s: %v", sock, err)
		}
		return
	}
	d.st = st
	d.run.ok("daemon", "running, answering on %s", sock)
	if st.Version != version.Version {
		d.run.warn("version", "run `"+adminCmd("vpn install")+"` so that both are the same build",
			"the daemon runs %s but this runos is %s", st.Version, version.Version)
	} else {
		d.run.ok("version", "the daemon and this runos are both %s", version.Version)
	}
	switch {
	case svcErr != nil:
		d.run.warn("service", "", "cannot tell whether the system service is installed: %v", svcErr)
	case !svc.Installed:
		d.run.warn("service", "install it so that the VPN comes back after a restart: "+adminCmd("vpn install"),
			"the daemon runs outside the system service (started by hand): it will not start at boot")
	case !svc.Enabled:
		d.run.warn("service", "register it again: "+adminCmd("vpn install"),
			"the service %s (%s) is installed but does not start at boot", svc.Service, svc.Platform)
	default:
		d.run.ok("service", "the service %s (%s) is installed and starts at boot", svc.Service, svc.Platform)
	}
	if ac := st.Access; ac != nil && !ac.Control {
		hint := ac.Hint
		if hint == "" {
			hint = access.GrantHint()
		}
		d.run.warn("access", hint, "you may only read the VPN status: %s", ac.Reason)
	} else if ac != nil {
		d.run.ok("access", "you may steer the VPN (%s)", ac.Reason)
	}
}

func serviceStartHint(s *installer.ServiceStatus) string {
	switch s.Platform {
	case installer.PlatformSystemd:
		return "sudo systemctl start " + s.Service
	case installer.PlatformSysV:
		return "sudo service " + s.Service + " start"
	case installer.PlatformLaunchd:
		return "sudo launchctl kickstart -k system/" + s.Service
	case installer.PlatformWindows:
		return "Start-Service " + s.Service + " in an elevated PowerShell"
	}
	return "with the system's service manager"
}

// checkSession: signed in, as whom, the time left; control and its clock.
func (d *doctorCtx) checkSession(ctx context.Context) {
	s, now := d.st.Session, d.now()
	switch {
	case s.State == localapi.SessionSignedOut:
		d.run.fail("session", "runos vpn up", "signed out")
		return
	case s.State == localapi.SessionRevoked:
		d.run.fail("session", "runos vpn up (it signs you in again with a fresh key)",
			"this device was removed from RunOS %s (revoked by an operator, or removed from another of your devices): its key is refused",
			ago(s.RevokedAt, now))
		return
	case s.State == localapi.SessionExpired || !s.ExpiresAt.IsZero() && !now.Before(s.ExpiresAt):
		d.run.fail("session", "runos vpn up (it signs you in again and reconnects your clusters)",
			"the session of %s expired %s; a sign-in lasts 24 hours", s.User, ago(s.ExpiresAt, now))
	case !s.ExpiresAt.IsZero() && s.ExpiresAt.Sub(now) <= expiryWarning:
		d.run.warn("session", "runos vpn up to sign in again before it lapses",
			"signed in as %s; the session ends in %s", s.User, fmtDuration(s.ExpiresAt.Sub(now)))
	default:
		d.run.ok("session", "signed in as %s until %s (%s left)", s.User, fmtTime(s.ExpiresAt, now), fmtDuration(s.ExpiresAt.Sub(now)))
	}
	d.checkControl(ctx, s)
}

func (d *doctorCtx) checkControl(ctx context.Context, s localapi.Session) {
	if s.APIURL == "" {
		return
	}
	at, rtt, err := d.sys.ControlClock(ctx, s.APIURL)
	if err != nil {
		d.run.fail("control", "check this machine's network and that "+s.APIURL+" is control's URL (runos config get api-url)",
			"control %s is unreachable: %v", s.APIURL, err)
		return
	}
	if s.Error != "" {
		d.run.warn("control", "", "control %s answers this check, but the daemon's last exchange failed: %s", s.APIURL, s.Error)
	}
	// The Date header has whole seconds: half a second of slack.
	skew := d.now().Sub(at.Add(rtt / 2)).Round(time.Second)
	abs := max(skew, -skew)
	clock := "turn on automatic (network) time in this machine's date and time settings"
	switch {
	case abs > skewFail:
		d.run.fail("clock", clock, "this machine's clock is %s control's: sessions would seem to end at the wrong time", fmtSkew(skew))
	case abs > skewWarn:
		d.run.warn("clock", clock, "this machine's clock is %s control's", fmtSkew(skew))
	default:
		d.run.ok("control", "control %s answers in %s; the clocks agree (within %s)", s.APIURL,
			rtt.Round(time.Millisecond), max(abs, time.Second).Round(time.Second))
	}
}

func fmtSkew(d time.Duration) string {
	if d < 0 {
		return fmtDuration(-d) + " behind"
	}
	return fmtDuration(d) + " ahead of"
}

// clusters are the clusters to check: --cid, else every wanted one.
func (d *doctorCtx) clusters() []localapi.ClusterStatus {
	var out []localapi.ClusterStatus
	for _, c := range d.st.Clusters {
		if d.flags.cid != "" && c.CID == d.flags.cid || d.flags.cid == "" && c.Wanted {
			out = append(out, c)
		}
	}
	if d.flags.cid != "" && len(out) == 0 {
		out = append(out, localapi.ClusterStatus{CID: d.flags.cid, State: localapi.ClusterDisconnected})
	}
	return out
}

// checkCluster runs the per-cluster checks, ids <cid>.<what>.
func (d *doctorCtx) checkCluster(ctx context.Context, c localapi.ClusterStatus) {
	id := func(what string) string { return c.CID + "." + what }
	switch {
	case !c.Wanted || c.State == localapi.ClusterDisconnected:
		d.run.fail(id("connection"), "runos vpn connect "+c.CID, "%s is not connected", c.CID)
		return
	case c.State != localapi.ClusterConnected:
		fix := "wait a moment, then run runos vpn doctor again; if it stays so: " + reconnect(c.CID)
		msg := c.Error
		if msg == "" {
			msg = "no answer from control about it yet"
		}
		d.run.fail(id("connection"), fix, "%s is %s: %s", c.CID, c.State, msg)
		return
	}
	ep, epErr := netip.ParseAddrPort(c.Server.Endpoint)
	d.checkEndpoint(ctx, c, ep, epErr)
	d.checkUDP(ctx, c, ep)
	switch {
	case d.awayFromPrivate(c):
		d.run.fail(id("path"), privateIngressFix(c), "neither UDP nor the relay reaches %s: %s", c.Server.Endpoint, privateIngressWords(c))
	case c.Path == localapi.PathRelay:
		d.run.warn(id("path"), "allow UDP "+udpPort(ep)+" to "+c.Server.Endpoint+" for the direct path",
			"through the relay (WireGuard over HTTPS): UDP to %s does not get through; it works, slower", c.Server.Endpoint)
	default:
		d.run.ok(id("path"), "direct: WireGuard over UDP to %s", c.Server.Endpoint)
	}
	if c.PeerUp {
		d.run.ok(id("handshake"), "the last handshake was %s (fresh within %s)", ago(c.LastHandshake, d.now()), localapi.HandshakeFresh)
	} else {
		d.run.fail(id("handshake"), "see "+id("udp")+" above", "no handshake with the VPN server for %s (last: %s)",
			localapi.HandshakeFresh, ago(c.LastHandshake, d.now()))
	}
	d.checkRoute(c)
	d.checkClusterDNS(ctx, c)
	d.checkHTTPS(ctx, c)
}

func udpPort(ep netip.AddrPort) string {
	if !ep.IsValid() {
		return "32768"
	}
	return fmt.Sprint(ep.Port())
}

// hairpinRisk: the endpoint is public while this machine sits on a private
// network, the case the product docs warn about.
func (d *doctorCtx) hairpinRisk(ep netip.AddrPort) bool {
	if !ep.IsValid() || api.AddressKind(ep.Addr()) != api.AddressPublic {
		return false
	}
	addrs, err := d.sys.LocalAddrs()
	if err != nil {
		return false
	}
	for _, p := range addrs {
		a := p.Addr()
		if a.Is4() && a.IsPrivate() {
			return true
		}
	}
	return false
}

func hairpinFix(c localapi.ClusterStatus) string {
	nid := c.Server.NodeID
	if nid == "" {
		nid = "<nid>"
	}
	return fmt.Sprintf("if the node is on your own network, give it a private ingress address first: runos nodes ingress %s --cid %s --ingress-ip <lan-ip> --ingress-not-published", nid, c.CID)
}

func (d *doctorCtx) checkEndpoint(_ context.Context, c localapi.ClusterStatus, ep netip.AddrPort, err error) {
	id := c.CID + ".endpoint"
	if err != nil {
		d.run.fail(id, reconnect(c.CID), "the VPN server's endpoint %q is not an address:port", c.Server.Endpoint)
		return
	}
	kind := api.AddressKind(ep.Addr())
	if d.awayFromPrivate(c) {
		d.run.fail(id, privateIngressFix(c), "VPN node %s at %s (%s): %s", c.Server.NodeID, ep, kind, privateIngressWords(c))
		return
	}
	if d.hairpinRisk(ep) {
		d.run.warn(id, hairpinFix(c), "VPN node %s at %s (%s) while this machine is on a private network: most routers will not hairpin a public address back inside, so a device on the same LAN cannot reach the server through a public ingress address",
			c.Server.NodeID, ep, kind)
		return
	}
	d.run.ok(id, "VPN node %s at %s (%s)", c.Server.NodeID, ep, kind)
}

// checkUDP asks the daemon for a fresh handshake now; when none comes it
// tells a closed port (nothing serves there) from silence (blocked).
func (d *doctorCtx) checkUDP(ctx context.Context, c localapi.ClusterStatus, ep netip.AddrPort) {
	id := c.CID + ".udp"
	res, err := d.sys.Daemon.Probe(ctx, localapi.ProbeRequest{CID: c.CID})
	if err != nil {
		// A reader may not probe: the last handshake is what there is.
		if api.IsCode(err, localapi.CodeForbidden) {
			if c.PeerUp {
				d.run.ok(id, "a handshake over UDP to %s %s (no fresh probe: you may only read)", c.Server.Endpoint, ago(c.LastHandshake, d.now()))
				return
			}
			err = errors.New("no recent handshake, and you may only read, so no probe was sent")
		}
		d.run.fail(id, "see the handshake check below", "probe %s: %v", c.CID, err)
		return
	}
	if res.OK {
		d.run.ok(id, "a fresh WireGuard handshake over UDP with %s in %.1f ms", res.Endpoint, res.Ms)
		return
	}
	port := udpPort(ep)
	if ep.IsValid() {
		if refused, rerr := d.sys.UDPRefused(ctx, ep); rerr == nil && refused {
			d.run.fail(id, fmt.Sprintf("the cluster's VPN server is down: ask its operator to check `runos nodes list --cid %s` (is %s no_heartbeat?) and the gateway on it, or to move the server: runos services wireguard move <id> --cid %s --target-node-id <nid>",
				c.CID, c.Server.NodeID, c.CID),
				"nothing listens on UDP %s at %s: the VPN server on %s is not running (the node refused the packet)", port, ep.Addr(), c.Server.NodeID)
			return
		}
	}
	if d.awayFromPrivate(c) {
		// No firewall rule would help: the address is not routed here.
		d.run.fail(id, privateIngressFix(c), "no handshake with the VPN server at %s: %s", c.Server.Endpoint, privateIngressWords(c))
		return
	}
	fix := fmt.Sprintf("allow UDP %s to %s in every firewall between here and the node (a WireGuard handshake, not a ping, is what tells)", port, c.Server.Endpoint)
	if d.hairpinRisk(ep) {
		fix += "; " + hairpinFix(c)
	}
	d.run.fail(id, fix, "no handshake with the VPN server at %s: UDP %s gets no answer (blocked on the way?)", c.Server.Endpoint, port)
}

// checkRoute: the server's address goes through the tunnel, and no other
// route claims part of the cluster's subnet.
func (d *doctorCtx) checkRoute(c localapi.ClusterStatus) {
	id := c.CID + ".route"
	tun := d.st.Tunnel.Interface
	subnet, err := netip.ParsePrefix(c.Subnet)
	server, serr := netip.ParseAddr(c.Server.Address)
	if err != nil || serr != nil {
		d.run.fail(id, reconnect(c.CID), "the daemon reports no subnet or server address for %s", c.CID)
		return
	}
	var others, wider []string
	if rs, err := d.sys.Routes(); err == nil {
		for _, r := range rs {
			if r.Interface == tun || r.Prefix.Bits() == 0 || !r.Prefix.Overlaps(subnet) || r.Table == 255 {
				continue
			}
			desc := fmt.Sprintf("%s via %s", r.Prefix, r.Interface)
			if r.Prefix.Bits() >= subnet.Bits() {
				others = append(others, desc)
			} else if !slices.Contains(wider, desc) {
				wider = append(wider, desc)
			}
		}
	}
	slices.Sort(others)
	others = slices.Compact(others)
	via, err := d.sys.RouteTo(server)
	switch {
	case err != nil:
		d.run.fail(id, reconnect(c.CID), "no route to %s: %v", server, err)
	case via != tun:
		fix := "remove the route that takes it, or turn off the VPN that added it"
		if len(others) > 0 {
			fix = fmt.Sprintf("remove it (%s), or turn off the VPN that added it; then %s", routeDelHint(others[0]), reconnect(c.CID))
		}
		what := ""
		if len(others) > 0 {
			what = ": " + quoteList(others) + " shadows the cluster's subnet"
		}
		d.run.fail(id, fix, "packets for %s go through %s, not %s%s", server, via, tun, what)
	case len(others) > 0:
		d.run.warn(id, "remove them, or turn off the VPN that added them", "%s goes through %s, but other routes claim part of %s: %s",
			server, tun, subnet, quoteList(others))
	case len(wider) > 0:
		note := ""
		if slices.ContainsFunc(wider, func(s string) bool { return strings.HasPrefix(s, api.CGNAT.String()) }) {
			note = " (100.64.0.0/10 is what Tailscale and other VPNs use)"
		}
		d.run.warn(id, "nothing to do while the more specific route through "+tun+" wins; if that VPN adds more specific routes into "+subnet.String()+", it takes the cluster's traffic",
			"%s goes through %s; %s overlaps the cluster's subnet%s", subnet, tun, quoteList(wider), note)
	default:
		d.run.ok(id, "%s goes through %s, and nothing else claims it", subnet, tun)
	}
}

func routeDelHint(route string) string {
	p, dev, _ := strings.Cut(route, " via ")
	return platform.AdminPrefix + "ip route del " + p + " dev " + dev
}

// checkClusterDNS: the cluster's name resolves through this machine's
// resolver to its VPN address.
func (d *doctorCtx) checkClusterDNS(ctx context.Context, c localapi.ClusterStatus) {
	id := c.CID + ".dns"
	if len(c.DNS.Domains) == 0 {
		d.run.fail(id, reconnect(c.CID), "the daemon has no DNS domain for %s", c.CID)
		return
	}
	name := c.DNS.Domains[0]
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	addrs, err := d.sys.LookupHost(lctx, name)
	cancel()
	fix := "see the dns check below; then " + reconnect(c.CID)
	switch {
	case err != nil:
		d.run.fail(id, fix, "%s does not resolve through this machine's resolver: %v", name, err)
	case !slices.Contains(addrs, c.Server.Address):
		d.run.fail(id, fix, "%s resolves to %s, not the VPN address %s: split DNS is not in effect (that is the public record)",
			name, quoteList(addrs), c.Server.Address)
	default:
		d.run.ok(id, "%s resolves to the VPN address %s", name, c.Server.Address)
	}
}

// checkHTTPS: the cluster's ingress answers HTTPS on 443 through the tunnel.
func (d *doctorCtx) checkHTTPS(ctx context.Context, c localapi.ClusterStatus) {
	id := c.CID + ".https"
	addr, err := netip.ParseAddr(c.Server.Address)
	if err != nil || len(c.DNS.Domains) == 0 {
		return // said by the checks before
	}
	name := c.DNS.Domains[0]
	status, err := d.sys.HTTPS(ctx, addr, name)
	if err == nil {
		d.run.ok(id, "https://%s answers through the tunnel (%s)", name, status)
		return
	}
	fix := "the cluster's ingress (Traefik, a host-network DaemonSet on 80 and 443 of the node) is not answering: check it on the cluster"
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		fix = "nothing came back through the tunnel: see " + c.CID + ".udp and " + c.CID + ".route above"
	}
	d.run.fail(id, fix, "https://%s at %s:443 does not answer: %v", name, addr, err)
}

// checkOutsideName: a name outside every cluster still resolves as before.
func (d *doctorCtx) checkOutsideName(ctx context.Context) {
	name := d.flags.outside
	if name == "" {
		name = "example.com"
		if u, err := url.Parse(d.st.Session.APIURL); err == nil && u.Hostname() != "" {
			if _, err := netip.ParseAddr(u.Hostname()); err != nil {
				name = u.Hostname()
			}
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	addrs, err := d.sys.LookupHost(lctx, name)
	cancel()
	var de *net.DNSError
	switch {
	case err == nil:
		d.run.ok("dns.outside", "%s (outside every cluster) resolves as before: %s", name, quoteList(addrs))
	case errors.As(err, &de) && de.IsNotFound:
		d.run.ok("dns.outside", "%s (outside every cluster) gets an answer from this machine's resolvers (no such name)", name)
	default:
		d.run.fail("dns.outside", "see the dns check below; disconnecting every cluster (runos vpn down) gives the resolver back as it was",
			"%s (outside every cluster) does not resolve: %v", name, err)
	}
}

// checkDNSPlumbing: the daemon's DNS mode and why, and whether another
// program rewrote the resolver behind it.
func (d *doctorCtx) checkDNSPlumbing(_ context.Context) {
	dns := d.st.DNS
	manager := "find what manages the resolver (NetworkManager, a DHCP client, resolvconf) and stop it rewriting it while the VPN is up, then reconnect: " +
		"runos vpn disconnect <cid> && runos vpn connect <cid>"
	connected := slices.ContainsFunc(d.st.Clusters, func(c localapi.ClusterStatus) bool { return c.State == localapi.ClusterConnected })
	switch {
	case dns.Error != "":
		d.run.fail("dns", manager, "split DNS (%s): %s", dns.Mode, dns.Error)
		return
	case dns.Mode == "off" || dns.Mode == "":
		d.run.warn("dns", "", "split DNS is off (%s): cluster names do not resolve privately", dns.Reason)
		return
	}
	if dns.Mode == dnsplit.ModeResolvConf && connected {
		if b, err := d.sys.ResolvConf(); err == nil && !dnsplit.IsSplitResolvConf(b) {
			d.run.fail("dns", manager, "/etc/resolv.conf no longer points at the daemon's forwarder: another program rewrote it behind the daemon")
			return
		}
	}
	if dns.Rewrites > 0 {
		d.run.warn("dns", manager, "%s (%s); another program rewrote the resolver %d time(s) in the last 10 minutes and the daemon put split DNS back",
			dns.Mode, dns.Reason, dns.Rewrites)
		return
	}
	d.run.ok("dns", "%s: %s", dns.Mode, dns.Reason)
}

// checkBrowser: the product docs' note on Chrome's local-network prompt.
func (d *doctorCtx) checkBrowser() {
	if !d.sys.Browser() {
		return
	}
	d.run.warn("browser", `in Chrome, when asked whether the site may find devices on your local network, choose Allow; if you dismissed the prompt, reopen it from the padlock in Chrome's address bar, under the site's permissions, then reload the page`,
		"Chrome (and other Chromium browsers) ask before letting a page served from a public address reach a private one: until you choose Allow, cluster pages hang and then time out (the runos CLI is never affected)")
}
