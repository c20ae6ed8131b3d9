// Package menu is RunOS Desktop's menu as a pure function of what the app
// knows: the daemon's state (its Status, or that it is not running, or that
// this user may only read it) and what the user is doing (a sign-in in
// progress, an action in flight, an error to show). It has no display and
// no side effects, so every state and transition the product docs name is
// tested here; desktop/tray renders a Menu and desktop/app runs the Ops a
// click or an event asks for.
package menu

// Icon names the tray icon for a state; desktop/icons holds the images.
type Icon int

// The tray's icons.
const (
	IconDisconnected Icon = iota
	IconConnecting
	IconConnected
	IconSignIn // a fresh sign-in is needed (or in progress)
	IconError
)

var iconNames = [...]string{"disconnected", "connecting", "connected", "signin", "error"}

func (i Icon) String() string {
	if int(i) < len(iconNames) {
		return iconNames[i]
	}
	return "unknown"
}

// Icons lists every icon, for the icon set and its tests.
func Icons() []Icon {
	return []Icon{IconDisconnected, IconConnecting, IconConnected, IconSignIn, IconError}
}

// OpKind is what a click (or an event) asks the app to do.
type OpKind int

// The app's operations. Up and Down are what `runos vpn up` and
// `runos vpn down` do, so the toggle and the CLI behave the same.
const (
	OpNone         OpKind = iota
	OpUp                  // sign in when needed (browser), then connect CID or the default cluster
	OpDown                // disconnect every cluster and end the session
	OpConnect             // connect CID (the session is valid)
	OpDisconnect          // disconnect CID
	OpCancelSignIn        // stop waiting for the browser sign-in
	OpRetry               // reach the daemon again now instead of after the backoff
	OpOpenConsole         // open the RunOS console in the browser
	OpQuit
)

var opNames = [...]string{"none", "up", "down", "connect", "disconnect", "cancel-sign-in", "retry", "open-console", "quit"}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return "unknown"
}

// Op is one operation; CID names the cluster for Connect, Disconnect and
// (optionally) Up.
type Op struct {
	Kind OpKind
	CID  string
}

func (o Op) String() string {
	if o.CID == "" {
		return o.Kind.String()
	}
	return o.Kind.String() + " " + o.CID
}

// Item is one menu row.
type Item struct {
	Title     string
	Tooltip   string
	Enabled   bool
	Checkable bool
	Checked   bool
	Click     Op // what clicking it does; OpNone for an informational line
}

// Menu is the whole tray menu, top to bottom: the status line, notices (the
// daemon is not running, read-only, an error …), the toggle, one row per
// cluster, the console and Quit.
type Menu struct {
	Icon     Icon
	Tooltip  string
	Status   Item
	Notices  []Item
	Toggle   Item
	Clusters []Item
	Console  Item
	Quit     Item
}

// Equal reports whether two menus render the same.
func (m Menu) Equal(o Menu) bool {
	return m.Icon == o.Icon && m.Tooltip == o.Tooltip && m.Status == o.Status &&
		m.Toggle == o.Toggle && m.Console == o.Console && m.Quit == o.Quit &&
		itemsEqual(m.Notices, o.Notices) && itemsEqual(m.Clusters, o.Clusters)
}

func itemsEqual(a, b []Item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
