package state

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/runos/vpn/dnsplit"
	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/store"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

const (
	// expiryWarning: status warns during the session's last hour.
	expiryWarning = time.Hour
	// noHandshakeGrace: a configured peer with no handshake yet is only
	// reported as trouble after this long (one lost initiation is normal).
	noHandshakeGrace = 15 * time.Second
)

// Derive returns the daemon's status (Seq is the caller's to set).
func Derive(in *Inputs) localapi.Status {
	st := localapi.Status{
		Version: in.Version,
		Control: in.Prefs.Control,
		Session: deriveSession(in),
		Tunnel:  deriveTunnel(in),
		DNS:     deriveDNS(in.DNS),
		Network: localapi.Network{MTU: in.Device.PathMTU, ChangedAt: in.NetworkChangedAt, WokeAt: in.Slept.To},
	}
	if st.Network.MTU == 0 {
		st.Network.MTU = in.Network.MTU() // no path looked up: the uplinks' guess
	}
	if in.Network.Default != nil || in.Network.Addrs != nil {
		st.Network.Uplink = in.Network.String()
	}
	live := sessionState(in) == signedIn
	cs := joined(in.Map, in.Trust)
	names := map[string]string{}
	cids := slices.Clone(in.Prefs.Wanted)
	for _, a := range in.Accounts {
		if names[a.CID] == "" {
			names[a.CID] = a.Name
		}
		cids = append(cids, a.CID)
	}
	for cid, c := range cs {
		if c.cc.Name != "" {
			names[cid] = c.cc.Name
		}
		cids = append(cids, cid)
	}
	slices.Sort(cids)
	cids = slices.Compact(cids)
	var rp reachPlan
	if live {
		rp = planReach(in, cs)
	}
	for _, cid := range cids {
		wanted := slices.Contains(in.Prefs.Wanted, cid)
		cst := localapi.ClusterStatus{CID: cid, Name: names[cid], Wanted: wanted, State: localapi.ClusterDisconnected,
			DNS: localapi.ClusterDNS{Domains: []string{}}}
		if wanted && live {
			deriveCluster(in, &cst, cs[cid])
			cst.Reach = rp.status[cid]
			if cs[cid] != nil {
				cst.Kept = kept(in)
			}
		} else if p, ok := pendingLeave(in, cid); ok {
			cst.Error = pendingText(in, p)
		}
		st.Clusters = append(st.Clusters, cst)
	}
	if st.Clusters == nil {
		st.Clusters = []localapi.ClusterStatus{}
	}
	st.Warnings = warnings(in)
	return st
}

// kept says a cluster's configuration is not control's of now: the map
// restored from disk at start, or the last one while control fails; nil
// when control answers.
func kept(in *Inputs) *localapi.KeptConfig {
	if !in.MapKept && in.ControlErr == "" {
		return nil
	}
	since := in.ControlErrSince
	if since.IsZero() {
		since = in.Now
	}
	const at = "2006-01-02 15:04 UTC"
	return &localapi.KeptConfig{ControlUnreachableSince: since, ConfigurationOf: in.MapReceivedAt,
		Message: fmt.Sprintf("control unreachable since %s; using the configuration of %s",
			since.UTC().Format(at), in.MapReceivedAt.UTC().Format(at))}
}

func deriveSession(in *Inputs) localapi.Session {
	s := localapi.Session{State: localapi.SessionSignedOut}
	switch sessionState(in) {
	case signedOut:
		return s
	case revoked:
		s.State, s.RevokedAt, s.Error = localapi.SessionRevoked, in.Prefs.RevokedAt, in.Prefs.RevokedWhy
		s.User, s.APIURL = in.Prefs.User, in.Prefs.APIURL
		return s
	case expired:
		s.State = localapi.SessionExpired
		s.Error = in.SessionErr
		switch {
		case lapsedAsleep(in):
			s.Error = expiredWhile(in)
		case s.Error == "" && !in.Prefs.ExpiresAt.IsZero():
			// The clock passed the end before control said so (or
			// before the wake detector's next tick): say what is known.
			s.Error = "your sign-in expired at " + in.Prefs.ExpiresAt.UTC().Format(time.RFC3339)
		}
	case signedIn:
		s.State = localapi.SessionSignedIn
		s.Error = in.ControlErr
	}
	s.User, s.ExpiresAt, s.APIURL, s.DeviceID = in.Prefs.User, in.Prefs.ExpiresAt, in.Prefs.APIURL, in.Prefs.DeviceID
	return s
}

func deriveTunnel(in *Inputs) localapi.Tunnel {
	t := localapi.Tunnel{Interface: in.Device.Interface, Up: in.Device.Up, Error: in.Device.Err, Addresses: []string{}}
	if t.Interface == "" {
		t.Interface = in.Interface
	}
	for _, a := range in.Device.Addresses {
		t.Addresses = append(t.Addresses, a.String())
	}
	if in.Device.PublicKey != (wgtypes.Key{}) && in.Device.Up {
		t.PublicKey = in.Device.PublicKey.String()
	}
	if _, err := deviceAddress(in.Map, in.Trust); err != nil && sessionState(in) == signedIn && t.Error == "" {
		t.Error = err.Error()
	}
	return t
}

func deriveDNS(s dnsplit.Status) localapi.DNS {
	if s.Mode == "" {
		return localapi.DNS{Mode: "off", Reason: "no split-DNS configurator", Error: s.Error}
	}
	return localapi.DNS{Mode: s.Mode, Reason: s.Reason, Error: s.Error, Rewrites: s.Rewrites}
}

// deriveCluster fills in a wanted cluster's connection while the session is live.
func deriveCluster(in *Inputs, cst *localapi.ClusterStatus, c *cluster) {
	if c == nil {
		// Not joined yet (the join is in flight or failed).
		cst.State = localapi.ClusterConnecting
		if e := in.JoinErrs[cst.CID]; e != "" {
			cst.State = localapi.ClusterError
			cst.Error = e
		}
		return
	}
	v := c.cc.VPN
	cst.Server = localapi.Server{NodeID: v.NodeID, Endpoint: v.Endpoint, PublicKey: v.PublicKey, Address: v.Address}
	cst.Subnet = v.Subnet
	cst.DNS = localapi.ClusterDNS{Server: v.DNS, Domains: slices.Clone(c.domains)}
	if cst.DNS.Domains == nil {
		cst.DNS.Domains = []string{}
	}
	// What the trust refused shows until something more urgent does.
	cst.Error = strings.Join(c.refused, "; ")
	switch {
	case c.err != nil:
		cst.State = localapi.ClusterError
		cst.Error = c.err.Error()
		return
	case !v.Ready:
		cst.State = localapi.ClusterConnecting
		cst.Error = "waiting for the cluster's VPN server to come up"
		return
	}
	if _, err := deviceAddress(in.Map, in.Trust); err != nil || in.Map.Device.Address == "" {
		cst.State = localapi.ClusterConnecting
		return
	}
	r, ok := in.Device.Peer(c.peer.PublicKey)
	if !ok {
		// Not on the device yet: being configured, or a move to a new
		// server key that is being applied right now.
		cst.State = localapi.ClusterConnecting
		return
	}
	cst.State = localapi.ClusterConnected
	cst.LastHandshake = r.LastHandshake
	cst.PeerUp = up(in, r)
	cst.Path, cst.PathReason, cst.Relay = r.Path.Path, r.Path.Reason, r.Path.Relay
	if cst.PeerUp {
		return
	}
	if quiet, silent := silence(r, in.Now); silent && fresh(r.LastHandshake, in.Now) {
		cst.Error = fmt.Sprintf("no answer from %s at %s for %d s", v.NodeID, v.Endpoint, int(quiet/time.Second))
		return
	}
	switch {
	case r.Path.Captive != "":
		cst.Error = captiveMessage(r.Path.Captive)
	case r.Path.Path == localapi.PathRelay && r.Path.RelayErr != "":
		cst.Error = fmt.Sprintf("UDP %d to %s gets no answer, and the relay %s fails: %s",
			c.peer.Endpoint.Port(), v.Endpoint, r.Path.Relay, r.Path.RelayErr)
	case r.Path.Path == localapi.PathRelay && r.LastHandshake.IsZero() && in.Now.Sub(r.AddedAt) >= noHandshakeGrace:
		cst.Error = fmt.Sprintf("no handshake with the VPN server at %s over UDP %d or its relay %s yet",
			v.Endpoint, c.peer.Endpoint.Port(), r.Path.Relay)
	case r.LastHandshake.IsZero() && in.Now.Sub(r.AddedAt) >= noHandshakeGrace:
		cst.Error = fmt.Sprintf("no handshake with the VPN server at %s yet: is UDP %d reachable from here?",
			v.Endpoint, c.peer.Endpoint.Port())
	case !r.LastHandshake.IsZero():
		cst.Error = fmt.Sprintf("no handshake with the VPN server at %s for more than %s",
			v.Endpoint, localapi.HandshakeFresh)
	}
}

func warnings(in *Inputs) []localapi.Warning {
	var w []localapi.Warning
	switch sessionState(in) {
	case revoked:
		w = append(w, localapi.Warning{Code: localapi.WarnDeviceRevoked,
			Message: fmt.Sprintf("this device was removed from RunOS at %s: run `runos vpn up` to sign in again with a new key (your clusters reconnect)",
				in.Prefs.RevokedAt.UTC().Format("2006-01-02 15:04 UTC"))})
	case expired:
		msg := "the session expired"
		if e := in.Prefs.ExpiresAt; !e.IsZero() && !in.SessionEnded {
			msg = "your sign-in expired at " + e.UTC().Format("2006-01-02 15:04 UTC")
			if lapsedAsleep(in) {
				msg += " while this computer was asleep"
			}
		}
		w = append(w, localapi.Warning{Code: localapi.WarnSessionExpired,
			Message: msg + ": run `runos vpn up` to sign in again (your clusters reconnect)"})
	case signedIn:
		if e := in.Prefs.ExpiresAt; !e.IsZero() && e.Sub(in.Now) <= expiryWarning {
			w = append(w, localapi.Warning{Code: localapi.WarnSessionExpiring,
				Message: fmt.Sprintf("the session ends at %s, in less than an hour: run `runos vpn up` to sign in again",
					e.UTC().Format("2006-01-02 15:04 UTC"))})
		}
	}
	if in.DNS.Error != "" {
		w = append(w, localapi.Warning{Code: localapi.WarnDNS, Message: "dns: " + in.DNS.Error})
	}
	if in.SaveErr != "" {
		w = append(w, localapi.Warning{Code: localapi.WarnNotSaved,
			Message: in.SaveErr + ": a restart would forget the latest changes; the daemon keeps trying"})
	}
	for _, p := range in.Prefs.Pending {
		code := localapi.WarnSignOutPending
		if p.Kind == store.PendingLeave {
			code = localapi.WarnLeavePending
		}
		w = append(w, localapi.Warning{Code: code, Message: pendingText(in, p)})
	}
	if p := captive(in); p != "" {
		w = append(w, localapi.Warning{Code: localapi.WarnCaptivePortal,
			Message: captiveMessage(p) + ": open any web page in a browser to sign in to the network; the VPN connects once it lets traffic through"})
	}
	return w
}

// pendingLeave finds a pending leave of cid.
func pendingLeave(in *Inputs, cid string) (store.Pending, bool) {
	for _, p := range in.Prefs.Pending {
		if p.Kind == store.PendingLeave && slices.Contains(p.Clusters, cid) {
			return p, true
		}
	}
	return store.Pending{}, false
}

// pendingText says what control has not heard, why, and what happens next.
func pendingText(in *Inputs, p store.Pending) string {
	what := "sign-out"
	if p.Kind == store.PendingLeave {
		what = "leaving " + strings.Join(p.Clusters, ", ")
	}
	why := in.PendingErrs[p.Key()]
	if why == "" {
		why = "control has not answered yet"
	}
	s := fmt.Sprintf("%s pending at control: %s; the daemon retries until control answers", what, why)
	if !p.ExpiresAt.IsZero() && p.Kind == store.PendingSignOut {
		s += fmt.Sprintf(" (the session lapses on its own at %s)", p.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	return s
}

// captive is the captive portal some wanted cluster's path met, "" when none.
func captive(in *Inputs) string {
	if sessionState(in) != signedIn {
		return ""
	}
	for _, p := range in.Device.Peers {
		if p.Path.Captive != "" && !up(in, p) {
			return p.Path.Captive
		}
	}
	return ""
}

func captiveMessage(portal string) string {
	if portal == "" || !strings.Contains(portal, "://") {
		return localapi.CaptivePortalMessage
	}
	return localapi.CaptivePortalMessage + " (" + portal + ")"
}

// lapsedAsleep reports whether the session's expiry fell inside the
// daemon's last sleep: it lapsed while the laptop was suspended.
func lapsedAsleep(in *Inputs) bool {
	e := in.Prefs.ExpiresAt
	return !e.IsZero() && !in.Slept.From.IsZero() && !e.Before(in.Slept.From) && !e.After(in.Slept.To)
}

// expiredWhile words a session that lapsed during a sleep, as control
// words an expiry ("your sign-in expired at …").
func expiredWhile(in *Inputs) string {
	return "your sign-in expired at " + in.Prefs.ExpiresAt.UTC().Format(time.RFC3339) + " while this computer was asleep"
}

// Prefixes renders prefixes for logs.
func Prefixes(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
