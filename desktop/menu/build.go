package menu

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runos/vpn/platform"
	"github.com/runos/vpn/vpnd/access"
	"github.com/runos/vpn/vpnd/localapi"
)

// Texts the tests and the docs share.
const (
	TitleSignInNeeded = "Sign-in needed"
	TitleRemoved      = "Signed out: this device was removed"
	TitleConnect      = "Connect"
	TitleDisconnect   = "Disconnect"
	TitleSignIn       = "Sign in…"
	TitleConsole      = "Open RunOS console"
	TitleQuit         = "Quit"
)

// InstallCommand is the command that installs the daemon on this OS.
func InstallCommand() string { return platform.AdminCommand("vpn install") }

// maxTitle keeps rows readable; the whole text goes in the tooltip.
const maxTitle = 72

// Build derives the menu from s; now formats "until when".
func Build(s State, now time.Time) Menu {
	m := Menu{
		Status:  Item{Title: statusLine(s, now)},
		Notices: notices(s, now),
		Toggle:  toggle(s),
		Console: Item{Title: TitleConsole, Enabled: ConsoleURL(s) != "", Click: Op{Kind: OpOpenConsole}, Tooltip: ConsoleURL(s)},
		Quit:    Item{Title: TitleQuit, Enabled: true, Click: Op{Kind: OpQuit}},
	}
	if s.Link == LinkUp {
		for _, c := range s.Status.Clusters {
			m.Clusters = append(m.Clusters, clusterRow(s, c))
		}
	}
	if len(m.Clusters) == 0 {
		// One quiet line keeps the cluster section (between its
		// separators) from collapsing into an empty gap.
		m.Clusters = []Item{{Title: noClusters(s)}}
	}
	m.Icon, m.Tooltip = summary(s)
	return m
}

// ConsoleURL is where "Open RunOS console" goes: the URL the app was
// given, else control's URL from the daemon's session, else the one in the
// user's config (the daemon forgets it at sign-out, and may not be
// running); "" disables it.
func ConsoleURL(s State) string {
	switch {
	case s.ConsoleURL != "":
		return s.ConsoleURL
	case s.Link == LinkUp && s.Status.Session.APIURL != "":
		return s.Status.Session.APIURL
	}
	return s.APIURL
}

func noClusters(s State) string {
	switch {
	case s.Link != LinkUp:
		return "Clusters show once the service answers"
	case signedIn(s):
		return "No cluster to connect to"
	}
	return "Clusters show after sign-in"
}

func signedIn(s State) bool {
	return s.Link == LinkUp && s.Status.Session.State == localapi.SessionSignedIn
}

func statusLine(s State, now time.Time) string {
	switch {
	case s.Link == LinkStarting:
		return "Reaching the RunOS VPN service…"
	case s.Link == LinkNoDaemon:
		return "The RunOS VPN service is not running"
	case s.Link == LinkLost:
		return "Lost the RunOS VPN service, reconnecting…"
	case s.SigningIn:
		return "Signing in… finish in your browser"
	case signedIn(s):
		ses := s.Status.Session
		who := "Signed in"
		if ses.User != "" {
			who += " as " + ses.User
		}
		if ses.ExpiresAt.IsZero() {
			return who
		}
		return who + " until " + when(ses.ExpiresAt, now)
	case s.Link == LinkUp && s.Status.Session.State == localapi.SessionRevoked:
		return TitleRemoved
	}
	return TitleSignInNeeded
}

// when formats a time near now the way a menu says it: "14:05" today,
// "Tue 14:05" within a week, else "2 Jan 14:05".
func when(t, now time.Time) string {
	t = t.In(now.Location())
	y1, m1, d1 := t.Date()
	y2, m2, d2 := now.Date()
	switch {
	case y1 == y2 && m1 == m2 && d1 == d2:
		return t.Format("15:04")
	case t.After(now) && t.Sub(now) < 6*24*time.Hour:
		return t.Format("Mon 15:04")
	}
	return t.Format("2 Jan 15:04")
}

func info(text string) Item {
	it := Item{Title: clip(strings.Join(strings.Fields(text), " "))}
	if it.Title != text {
		it.Tooltip = text
	}
	return it
}

// lines wraps a notice into up to maxLines rows at word boundaries: a
// tray shows no tooltips on disabled rows, and an error must be readable.
func lines(text string) []Item {
	const maxLines = 3
	var out []Item
	line := ""
	for _, w := range strings.Fields(text) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= maxTitle:
			line += " " + w
		default:
			out = append(out, Item{Title: clip(line)})
			line = "    " + w // continuation lines are indented
		}
	}
	if line != "" {
		out = append(out, Item{Title: clip(line)})
	}
	if len(out) > maxLines {
		out = out[:maxLines]
		last := &out[maxLines-1]
		if !strings.HasSuffix(last.Title, "…") {
			last.Title = clip(last.Title + "…")
		}
	}
	for i := range out {
		out[i].Tooltip = text
	}
	return out
}

func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxTitle {
		return s
	}
	r := []rune(s)
	return string(r[:maxTitle-1]) + "…"
}

func notices(s State, now time.Time) []Item {
	var out []Item
	if s.ConfigErr != "" {
		out = append(out, lines("Config: "+s.ConfigErr)...)
	}
	switch s.Link {
	case LinkNoDaemon:
		out = append(out, lines("Install or start it: "+InstallCommand())...)
		out = append(out, Item{Title: "Try again", Enabled: true, Click: Op{Kind: OpRetry}, Tooltip: s.LinkErr})
		return out
	case LinkLost, LinkStarting:
		return out
	}
	st := s.Status
	if s.ReadOnly {
		hint := s.ReadHint
		if hint == "" {
			hint = access.GrantHintFor(s.OSUser)
		}
		ro := lines("You may only view the VPN status")
		for i := range ro {
			if s.ReadWhy != "" {
				ro[i].Tooltip = s.ReadWhy
			}
		}
		out = append(out, ro...)
		out = append(out, lines("To change it, "+lowerFirst(hint))...)
	}
	if st.Session.State == localapi.SessionRevoked && !s.SigningIn {
		line := "RunOS no longer accepts this device's key"
		if !st.Session.RevokedAt.IsZero() {
			line = "Removed from RunOS at " + when(st.Session.RevokedAt, now) + "; signing in makes a new key"
		}
		out = append(out, lines(line)...)
	}
	if st.Session.State == localapi.SessionExpired && !s.SigningIn {
		line := "Your sign-in has ended (a sign-in lasts 24 hours)"
		if !st.Session.ExpiresAt.IsZero() {
			line = "Your sign-in ended at " + when(st.Session.ExpiresAt, now) + " (a sign-in lasts 24 hours)"
		}
		out = append(out, lines(line)...)
	}
	if st.Session.Error != "" && st.Session.State != localapi.SessionRevoked {
		out = append(out, lines("Control: "+st.Session.Error)...)
	}
	if st.Tunnel.Error != "" {
		out = append(out, lines("Tunnel: "+st.Tunnel.Error)...)
	}
	if st.DNS.Error != "" {
		out = append(out, lines("DNS: "+st.DNS.Error)...)
	}
	for _, w := range st.Warnings {
		switch {
		case w.Code == localapi.WarnDNS && st.DNS.Error != "":
			// The "DNS:" line above says it.
		case w.Code == localapi.WarnSessionExpired && st.Session.State == localapi.SessionExpired,
			w.Code == localapi.WarnDeviceRevoked && st.Session.State == localapi.SessionRevoked:
			// The menu words it: the status or sign-in line above and "Sign in…".
		default:
			// Any other code, known or not, as the daemon words it.
			out = append(out, lines(w.Message)...)
		}
	}
	if s.Err != "" {
		out = append(out, lines("Failed: "+s.Err)...)
	}
	return out
}

func capitalizeFirst(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return strings.ToUpper(string(r)) + s[n:]
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return strings.ToLower(string(r)) + s[n:]
}

// wantedAny reports whether the user asked for any cluster: then the
// toggle is "Disconnect".
func wantedAny(st *localapi.Status) bool {
	for _, c := range st.Clusters {
		if c.Wanted || c.State == localapi.ClusterConnected || c.State == localapi.ClusterConnecting {
			return true
		}
	}
	return false
}

func (s State) busy(kind OpKind) bool {
	for _, b := range s.Busy {
		if b.Kind == kind {
			return true
		}
	}
	return false
}

func toggle(s State) Item {
	up := Op{Kind: OpUp}
	switch {
	case s.Link != LinkUp:
		return Item{Title: TitleConnect}
	case s.SigningIn:
		return Item{Title: "Cancel sign-in", Enabled: true, Click: Op{Kind: OpCancelSignIn},
			Tooltip: "Stop waiting for the sign-in in your browser"}
	case s.busy(OpDown):
		return Item{Title: "Disconnecting…"}
	case s.busy(OpUp):
		return Item{Title: "Connecting…"}
	}
	st := s.Status
	var it Item
	switch {
	case st.Session.State == localapi.SessionExpired:
		// A fresh sign-in is needed: the toggle says so, and nothing opens
		// a browser until the user clicks it.
		it = Item{Title: TitleSignIn, Click: up, Tooltip: "Sign in in your browser, then connect"}
	case st.Session.State == localapi.SessionRevoked:
		it = Item{Title: TitleSignIn, Click: up, Tooltip: "Sign in in your browser: this device gets a new key, then connects"}
	case st.Session.State != localapi.SessionSignedIn:
		it = Item{Title: TitleConnect, Click: up, Tooltip: "Sign in in your browser, then connect your default cluster"}
	case wantedAny(st):
		it = Item{Title: TitleDisconnect, Click: Op{Kind: OpDown}, Tooltip: "Disconnect every cluster and end the session"}
	default:
		it = Item{Title: TitleConnect, Click: up, Tooltip: "Connect your default cluster"}
	}
	it.Enabled = !s.ReadOnly
	return it
}

// trouble is what a cluster row adds after its cid, "" when all is well.
func trouble(s State, c localapi.ClusterStatus) string {
	for _, b := range s.Busy {
		if b.CID != c.CID {
			continue
		}
		switch b.Kind {
		case OpDisconnect:
			return "disconnecting…"
		case OpUp:
			if s.SigningIn {
				return "signing in…"
			}
			return "connecting…"
		case OpConnect:
			if c.State != localapi.ClusterConnected {
				return "connecting…"
			}
		}
	}
	switch c.State {
	case localapi.ClusterConnecting:
		return "connecting…"
	case localapi.ClusterConnected:
		if !c.PeerUp && captivePortal(s.Status) {
			return localapi.CaptivePortalMessage
		}
		if !c.PeerUp {
			if n := privateNote(s.Status.Network.Uplink, c); n != "" {
				return n // not a firewall's doing: see private.go
			}
			if c.Error != "" {
				// What the daemon observed, e.g. "no answer from n1 at
				// 10.77.0.21:32768 for 17 s".
				return c.Error
			}
			return "no handshake"
		}
		if c.Kept != nil {
			// Up on what control sent earlier: say so, as status does.
			return c.Kept.Message
		}
	case localapi.ClusterError:
		if c.Error != "" {
			return c.Error
		}
		return "error"
	}
	return ""
}

func clusterRow(s State, c localapi.ClusterStatus) Item {
	// The row is the cid, as in the docs ("ky3 — no handshake"), with
	// "(relayed)" while its traffic goes over the node's HTTPS relay; the
	// cluster's name goes in the tooltip.
	full := c.CID
	if c.Path == localapi.PathRelay && c.State == localapi.ClusterConnected {
		full += " (relayed)"
	}
	if t := trouble(s, c); t != "" {
		full += " — " + t
	}
	it := info(full)
	it.Checkable = true
	it.Checked = c.State == localapi.ClusterConnected
	on := c.Wanted || c.State == localapi.ClusterConnected || c.State == localapi.ClusterConnecting
	ses := s.Status.Session.State
	switch {
	case on && ses == localapi.SessionSignedIn:
		it.Click = Op{Kind: OpDisconnect, CID: c.CID}
	case ses == localapi.SessionSignedIn:
		it.Click = Op{Kind: OpConnect, CID: c.CID}
	default:
		// `runos vpn up --cid`: sign in, then connect this cluster.
		it.Click = Op{Kind: OpUp, CID: c.CID}
	}
	busy := s.busyOn(it.Click) || s.SigningIn
	it.Enabled = !s.ReadOnly && !busy
	if it.Tooltip == "" {
		it.Tooltip = rowTooltip(s.Status.Network.Uplink, c)
	}
	if c.Name != "" && c.Name != c.CID {
		it.Tooltip = c.Name + ": " + it.Tooltip
	}
	if r := reachTooltip(c.Reach); r != "" && c.State == localapi.ClusterConnected {
		it.Tooltip += "\n" + r
	}
	return it
}

func rowTooltip(uplink string, c localapi.ClusterStatus) string {
	switch {
	case c.State == localapi.ClusterConnected && c.PeerUp && c.Path == localapi.PathRelay:
		return fmt.Sprintf("Connected through %s over its HTTPS relay (%s): %s", c.Server.NodeID, c.Relay, c.PathReason)
	case c.State == localapi.ClusterConnected && c.PeerUp:
		return fmt.Sprintf("Connected through %s (%s)", c.Server.NodeID, c.Server.Endpoint)
	case c.State == localapi.ClusterConnected && privateNote(uplink, c) != "":
		return privateTooltip(c)
	case c.State == localapi.ClusterConnected && c.Error != "":
		return capitalizeFirst(c.Error) + "; the tunnel to " + c.CID + " carries nothing until it answers again"
	case c.State == localapi.ClusterConnected:
		return fmt.Sprintf("No WireGuard handshake with %s (%s) in the last %s", c.Server.NodeID, c.Server.Endpoint, localapi.HandshakeFresh)
	case c.Error != "":
		return c.Error
	}
	return "Click to connect"
}

// summary picks the icon and the tray tooltip.
func summary(s State) (Icon, string) {
	const app = "RunOS VPN"
	switch {
	case s.Link == LinkStarting:
		return IconDisconnected, app
	case s.Link != LinkUp:
		return IconError, app + ": the service is not running"
	case s.SigningIn:
		return IconSignIn, app + ": signing in"
	}
	st := s.Status
	var up, connecting, bad []string
	for _, c := range st.Clusters {
		switch {
		case c.State == localapi.ClusterConnected && c.PeerUp:
			up = append(up, c.CID)
		case c.State == localapi.ClusterConnecting:
			connecting = append(connecting, c.CID)
		case c.State == localapi.ClusterConnected, c.State == localapi.ClusterError && c.Wanted:
			bad = append(bad, c.CID)
		}
	}
	for _, b := range s.Busy {
		if b.Kind == OpUp || b.Kind == OpConnect {
			connecting = append(connecting, b.CID)
		}
	}
	switch {
	case len(bad) > 0 || st.Tunnel.Error != "" || s.Err != "":
		return IconError, app + ": trouble" + list(" with ", bad)
	case st.Session.State == localapi.SessionExpired:
		return IconSignIn, app + ": sign-in needed"
	case st.Session.State == localapi.SessionRevoked:
		return IconSignIn, app + ": signed out, this device was removed"
	case len(connecting) > 0:
		return IconConnecting, app + ": connecting" + list(" to ", connecting)
	case len(up) > 0:
		return IconConnected, app + ": connected" + list(" to ", up)
	}
	return IconDisconnected, app + ": disconnected"
}

func list(prefix string, cids []string) string {
	var named []string
	for _, c := range cids {
		if c != "" && !slices.Contains(named, c) {
			named = append(named, c)
		}
	}
	if len(named) == 0 {
		return ""
	}
	return prefix + strings.Join(named, ", ")
}

// captivePortal reports whether the daemon says a captive portal holds the
// network (by the warning's code).
func captivePortal(st *localapi.Status) bool {
	if st == nil {
		return false
	}
	for _, w := range st.Warnings {
		if w.Code == localapi.WarnCaptivePortal {
			return true
		}
	}
	return false
}
