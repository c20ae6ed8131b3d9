package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/localapi/vpnup"
)

// chooseHint adds to up's "choose a cluster" how to choose from the
// command line.
func chooseHint(err error) error {
	if errors.Is(err, vpnup.ErrChooseCluster) {
		return fmt.Errorf("%w; pass --cid <cid> or set a default with `runos config set cid <cid>`", err)
	}
	return err
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
	case localapi.SessionRevoked:
		return connectState{fatal: errors.New("this device was removed from RunOS while connecting; run `runos vpn up` to sign in again with a fresh key")}
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
