// Package vpnup is what `runos vpn up` decides, in one place for the two
// things that run it: the CLI (`runos vpn up`) and RunOS Desktop's toggle.
// Both ask the same questions of the daemon's status: must the user sign in
// first (SignInReason), and once the daemon holds a live session, which
// cluster does up connect (Decide): --cid, else the configured cid, else
// nothing when the daemon restored the clusters the user had connected,
// else the account's only cluster, listed by control with the fresh token.
//
// The callers do the rest their own way (the CLI prints and waits for the
// handshake; the desktop hands the menu the daemon's answer) and word the
// hint for a choice (ChooseError) for their user: a flag, or a click.
//
// It lives below vpnd/localapi, whose status it reads, and above its two
// users, so every import runs downward.
package vpnup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/vpnd/localapi"
)

// SignInReason says why up must sign in first, or "" when the daemon's
// session serves: signed out, lapsed (by the daemon's word or the clock),
// or signed in to another control than the one configured (apiURL, "" when
// none is).
func SignInReason(s localapi.Session, apiURL string, now time.Time) string {
	switch {
	case s.State == localapi.SessionRevoked:
		return "this device was removed from RunOS; signing in again with a fresh key to " + orDaemon(apiURL, s.APIURL)
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

// Restored are the clusters the daemon keeps connected: restored by the
// daemon itself after a fresh sign-in of the same user, or asked for
// earlier.
func Restored(st *localapi.Status) []string {
	var out []string
	for _, c := range st.Clusters {
		if c.Wanted {
			out = append(out, c.CID)
		}
	}
	return out
}

// ErrChooseCluster is what every ChooseError is (errors.Is).
var ErrChooseCluster = errors.New("choose a cluster")

// ChooseError is up's answer when it may not pick for the user: the
// account has several clusters, or none with a VPN the user can reach.
// Callers add how to choose, in their own words.
type ChooseError struct {
	Available []string // sorted; empty when the account has none
}

func (e *ChooseError) Error() string {
	if len(e.Available) == 0 {
		return ErrChooseCluster.Error() + ": your account has no cluster with a VPN you can reach"
	}
	return fmt.Sprintf("%s: your account has %d clusters (%s)", ErrChooseCluster, len(e.Available), strings.Join(e.Available, ", "))
}

// Unwrap makes errors.Is(err, ErrChooseCluster) hold.
func (e *ChooseError) Unwrap() error { return ErrChooseCluster }

// ChooseCluster picks the cluster up connects: cid (the user's choice:
// --cid, a row), else the configured cid, else the account's only cluster
// among available. When the daemon already restored wanted clusters, no
// default is needed ("" and no error). Else, with several or no clusters,
// the error is a *ChooseError.
func ChooseCluster(cid, configCID string, restored, available []string) (string, error) {
	switch {
	case cid != "":
		return cid, nil
	case configCID != "":
		return configCID, nil
	case len(restored) > 0:
		return "", nil
	case len(available) == 1:
		return available[0], nil
	}
	s := slices.Clone(available)
	slices.Sort(s)
	return "", &ChooseError{Available: s}
}

// Lister lists the signed-in account's clusters at control; *api.Client
// with the fresh sign-in's token is one.
type Lister interface {
	Clusters(ctx context.Context) ([]api.Cluster, error)
}

// Connectable are the clusters up may pick as the only one. After a fresh
// sign-in (fresh is control with the new token) they are the account's
// clusters that run a WireGuard VPN, as control lists them: the daemon
// forgets its list on a new session and has not fetched the next one yet.
// Without one (fresh nil: the daemon's session still serves) they are the
// clusters the daemon lists.
func Connectable(ctx context.Context, fresh Lister, st *localapi.Status) ([]string, error) {
	if fresh == nil {
		var out []string
		for _, c := range st.Clusters {
			out = append(out, c.CID)
		}
		return out, nil
	}
	cs, err := fresh.Clusters(ctx)
	if err != nil {
		return nil, fmt.Errorf("list your clusters: %w", err)
	}
	var out []string
	for _, cl := range cs {
		if cl.UserVPN == api.UserVPNWireGuard {
			out = append(out, cl.CID)
		}
	}
	return out, nil
}

// Plan is what up does once the daemon holds a live session.
type Plan struct {
	// Restored are the clusters the daemon reconnects by itself; up waits
	// for them too and connects none of them.
	Restored []string
	// Connect is the cluster up asks the daemon to connect; "" when the
	// restored ones are all there is to do.
	Connect string
}

// Decide is up's choice after the sign-in (if any): st is the daemon's
// status once it holds the session (SetSession's answer, or the status
// when no sign-in was needed), cid the user's choice ("" for none),
// configCID the configured default, fresh control with the new token (nil
// when up did not sign in). Control is asked only when nothing else
// decides.
func Decide(ctx context.Context, cid, configCID string, st *localapi.Status, fresh Lister) (Plan, error) {
	p := Plan{Restored: Restored(st)}
	var available []string
	if cid == "" && configCID == "" && len(p.Restored) == 0 {
		var err error
		if available, err = Connectable(ctx, fresh, st); err != nil {
			return p, err
		}
	}
	pick, err := ChooseCluster(cid, configCID, p.Restored, available)
	if err != nil {
		return p, err
	}
	if pick != "" && !slices.Contains(p.Restored, pick) {
		p.Connect = pick
	}
	return p, nil
}
