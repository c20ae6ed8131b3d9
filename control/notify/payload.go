// Package notify carries committed changes between control replicas that
// share a PostgreSQL store (DESIGN.md "Scale"). The committing replica's
// store publishes each change with NOTIFY on one channel, in the change's
// own transaction (so only committed changes are told, in commit order);
// every replica LISTENs on a dedicated connection and publishes what it
// hears to its own hub (control/hub), which wakes the long-polls concerned.
// When the listening connection drops, the replica re-reads the versions of
// the topics changed since the last change it heard and wakes whoever is
// behind: nothing is missed, and a repeated wake only makes a long-poll
// compare versions again (docs/internals.md "Push").
//
// It is not needed, and not used, with SQLite: one replica publishes to its
// own hub after each commit.
package notify

import (
	"fmt"
	"strconv"
	"strings"
)

// Channel is the one NOTIFY channel of control's changes.
const Channel = "runos_changes"

// maxPayload keeps a notification under PostgreSQL's 8000-byte limit.
// A change touching more topics than fit (ending a session with many
// devices) is told by its version alone: listeners re-read what changed.
const maxPayload = 7900

// Change is one committed change as told to the other replicas.
type Change struct {
	Origin  string   // the committing replica's store instance, to skip one's own
	Version uint64   // the global version it committed as
	Topics  []string // nil with Reread
	Reread  bool     // too many topics to tell: read those changed at Version
}

// Payload encodes c: "1 <origin> <version> <topic>…", or "… *" when the
// topics do not fit. Topics and origins hold no spaces (topic names are
// made by control/hub of ids control generates).
func Payload(c Change) string {
	var b strings.Builder
	b.WriteString("1 ")
	b.WriteString(c.Origin)
	b.WriteByte(' ')
	b.WriteString(strconv.FormatUint(c.Version, 10))
	head := b.Len()
	for _, t := range c.Topics {
		b.WriteByte(' ')
		b.WriteString(t)
		if b.Len() > maxPayload {
			s := b.String()[:head]
			return s + " *"
		}
	}
	return b.String()
}

// Parse decodes a payload made by Payload.
func Parse(p string) (Change, error) {
	f := strings.Fields(p)
	if len(f) < 3 || f[0] != "1" {
		return Change{}, fmt.Errorf("notify: payload %.40q: want \"1 <origin> <version> <topics>\"", p)
	}
	v, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil || v == 0 {
		return Change{}, fmt.Errorf("notify: payload %.40q: bad version", p)
	}
	c := Change{Origin: f[1], Version: v}
	if len(f) == 4 && f[3] == "*" {
		c.Reread = true
		return c, nil
	}
	c.Topics = f[3:]
	return c, nil
}
