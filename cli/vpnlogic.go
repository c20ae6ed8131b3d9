package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
)

// signInReason says why `vpn up` must sign in first, or "" when the daemon's
// session serves: signed out, lapsed (by the daemon's word or the clock),
// or signed in to another control than the one configured.
func signInReason(s localapi.Session, apiURL string, now time.Time) string {
	switch {
	case s.State == localapi.SessionExpired:
		return "your sign-in expired; signing in again to " + orDaemon(apiURL, s.APIURL)
	case s.State != localapi.SessionSignedIn:
		return "not signed in; signing in to " + orDaemon(apiURL, s.APIURL)
	case !s.ExpiresAt.IsZero() && !now.Before(s.ExpiresAt):
		return "your sign-in expired; signing in again to " + orDaemon(apiURL, s.APIURL)
	case apiURL != "" && s.APIURL != "" && strings.TrimRight(s.APIURL, "/") != apiURL:
		return fmt.Sprintf("the daemon is signed in to %s, not %s; signing in", s.APIURL, apiURL)
	}
	return ""
}

// orDaemon is the configured control URL, else the one the daemon used.
func orDaemon(configured, daemon string) string {
	if configured != "" {
		return configured
	}
	return strings.TrimRight(daemon, "/")
}

// wantedClusters are the clusters the daemon keeps connected (restored
// after a fresh sign-in, or asked for earlier).
func wantedClusters(st *localapi.Status) []string {
	var out []string
	for _, c := range st.Clusters {
		if c.Wanted {
			out = append(out, c.CID)
		}
	}
	return out
}

// errChooseCluster is wrapped by chooseCluster when the user must choose.
var errChooseCluster = errors.New("choose a cluster")

// chooseCluster picks the cluster `vpn up` connects: --cid, else the
// configured cid, else the account's only cluster. When the daemon already
// restored wanted clusters, no default is needed ("" and no error). Else,
// with several or no clusters, the error says how to choose one.
func chooseCluster(flagCID, configCID string, restored, available []string) (string, error) {
	switch {
	case flagCID != "":
		return flagCID, nil
	case configCID != "":
		return configCID, nil
	case len(restored) > 0:
		return "", nil
	case len(available) == 1:
		return available[0], nil
	case len(available) == 0:
		return "", fmt.Errorf("%w: your account has no cluster with a VPN you can reach; pass --cid <cid> or set a default with `runos config set cid <cid>`", errChooseCluster)
	}
	s := slices.Clone(available)
	slices.Sort(s)
	return "", fmt.Errorf("%w: your account has %d clusters (%s); pass --cid <cid> or set a default with `runos config set cid <cid>`",
		errChooseCluster, len(s), strings.Join(s, ", "))
}

// connectState is how far the wanted clusters are, from one Status.
type connectState struct {
	done    bool   // every target has peerUp
	fatal   error  // waiting cannot succeed (the session ended)
	waiting string // what is still missing, for the progress line
	reason  string // the last error seen, for the timeout message
}

// checkConnected evaluates st against targets.
func checkConnected(st *localapi.Status, targets []string) connectState {
	switch st.Session.State {
	case localapi.SessionExpired:
		return connectState{fatal: errors.New("the sign-in expired while connecting; run `runos vpn up` to sign in again")}
	case localapi.SessionSignedOut:
		return connectState{fatal: errors.New("the session ended while connecting; run `runos vpn up`")}
	}
	var waiting, reasons []string
	for _, cid := range targets {
		c := findCluster(st, cid)
		switch {
		case c == nil:
			waiting = append(waiting, cid+": waiting for the daemon")
		case c.PeerUp:
			continue
		case c.Error != "":
			waiting = append(waiting, cid+": "+c.Error)
			reasons = append(reasons, cid+": "+c.Error)
		case c.Server.NodeID != "":
			waiting = append(waiting, fmt.Sprintf("%s: %s, waiting for the handshake with %s (%s)", cid, c.State, c.Server.NodeID, c.Server.Endpoint))
		default:
			waiting = append(waiting, cid+": "+c.State)
		}
	}
	if st.Tunnel.Error != "" {
		reasons = append(reasons, "tunnel: "+st.Tunnel.Error)
	}
	return connectState{
		done:    len(waiting) == 0,
		waiting: strings.Join(waiting, "; "),
		reason:  strings.Join(reasons, "; "),
	}
}

func findCluster(st *localapi.Status, cid string) *localapi.ClusterStatus {
	for i := range st.Clusters {
		if st.Clusters[i].CID == cid {
			return &st.Clusters[i]
		}
	}
	return nil
}

// timeoutError explains a wait that ran out: the reason the daemon gave,
// or, with none, what usually keeps a handshake from happening.
func timeoutError(st *localapi.Status, targets []string, timeout time.Duration, reason string) error {
	var missing []string
	var hint string
	for _, cid := range targets {
		c := findCluster(st, cid)
		if c != nil && c.PeerUp {
			continue
		}
		missing = append(missing, cid)
		if c != nil && c.Server.Endpoint != "" && hint == "" {
			hint = fmt.Sprintf("no answer from the VPN server on %s at %s: check that UDP %s is reachable from here",
				c.Server.NodeID, c.Server.Endpoint, portOf(c.Server.Endpoint))
		}
	}
	if reason == "" {
		reason = hint
	}
	if reason == "" {
		reason = "the cluster's VPN server has not answered"
	}
	return fmt.Errorf("no handshake with %s within %s: %s", strings.Join(missing, ", "), timeout, reason)
}

func portOf(endpoint string) string {
	if i := strings.LastIndexByte(endpoint, ':'); i >= 0 {
		return endpoint[i+1:]
	}
	return "32768"
}
