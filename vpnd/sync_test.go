package vpnd

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/runos/vpn/internal/syncbuf"
	"github.com/runos/vpn/vpnd/localapi"
)

// The daemon follows its map by one push stream; against a control that
// does not stream it falls back to long-polls and says so in its log;
// with --long-poll it long-polls from the start, as older daemons did.
// Each way a move reaches the tunnel.
func TestMapFollowedByStreamOrLongPolls(t *testing.T) {
	const fallbackWarning = "control does not stream the device map: long-polling instead"
	for _, tc := range []struct {
		name                string
		noStreams, longPoll bool
		wantRequests        func(n int) bool // map requests after the three changes
		wantWarning         bool
	}{
		{name: "stream", wantRequests: func(n int) bool { return n == 1 }}, // one stream: the connect fetches no map of its own
		{name: "control without streams", noStreams: true, wantRequests: func(n int) bool { return n >= 5 }, wantWarning: true},
		{name: "--long-poll", longPoll: true, wantRequests: func(n int) bool { return n >= 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.fc.NoStreams = tc.noStreams
			w.fc.AddSession("tok1", "alice@example.com", time.Hour)
			logs := &syncbuf.Buffer{}
			td := startDaemon(t, w, t.TempDir(), func(d *daemon) {
				d.longPoll = tc.longPoll
				d.log = slog.New(slog.NewTextHandler(logs, nil))
			})
			handOver(t, td, w, "tok1")
			if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
				t.Fatal(aerr)
			}
			eventually(t, "ky3 peerUp", func() bool { return cluster(td.Status(), "ky3").PeerUp })
			for i, node := range []string{"n2", "n1", "n2"} {
				w.fc.SetVPN("ky3", w.vpn("ky3", node, "10.2.0.2:3276"+string(rune('0'+i)), "100.100.1"))
				eventually(t, "ky3 on "+node, func() bool {
					c := cluster(td.Status(), "ky3")
					return c.Server.NodeID == node && c.Server.Endpoint == "10.2.0.2:3276"+string(rune('0'+i)) && c.PeerUp
				})
			}
			if n := w.fc.Calls("GET /v1/devices/{id}/map"); !tc.wantRequests(n) {
				t.Errorf("%d map requests:\n%s", n, logs.String())
			}
			if got := strings.Count(logs.String(), fallbackWarning); (got > 0) != tc.wantWarning {
				t.Errorf("the fallback warning logged %d times:\n%s", got, logs.String())
			}
			if st := td.Status(); st.Session.State != localapi.SessionSignedIn {
				t.Errorf("session %+v", st.Session)
			}
		})
	}
}

// TestStreamResumedWithoutSignInAgain: when the stream drops (its control
// replica died), the daemon reconnects with the stream alone, from the
// version it had: not the account's clusters and a join per cluster
// first, which is what 10,000 devices would put on the survivors at once.
func TestStreamResumedWithoutSignInAgain(t *testing.T) {
	w := newWorld(t)
	w.fc.AddSession("tok1", "alice@example.com", time.Hour)
	td := startDaemon(t, w, t.TempDir())
	handOver(t, td, w, "tok1")
	if _, aerr := td.connect(context.Background(), "ky3"); aerr != nil {
		t.Fatal(aerr)
	}
	// A move arrives only by the map: after it, the stream has delivered.
	moved := func(node string) {
		t.Helper()
		w.fc.SetVPN("ky3", w.vpn("ky3", node, "10.2.0.2:32768", "100.100.1"))
		eventually(t, "ky3 moved to "+node, func() bool {
			c := cluster(td.Status(), "ky3")
			return c.Server.NodeID == node && c.PeerUp
		})
	}
	moved("n2")
	clusters, joins := w.fc.Calls("GET /v1/clusters"), w.fc.Calls("PUT /v1/devices/{id}/clusters/{cid}")
	maps := w.fc.Calls("GET /v1/devices/{id}/map")

	w.fc.SetDown(true) // drops the stream, and refuses every connection
	eventually(t, "the daemon sees control gone", func() bool { return td.Status().Session.Error != "" })
	w.fc.SetDown(false)
	eventually(t, "the stream reconnected", func() bool { return w.fc.Calls("GET /v1/devices/{id}/map") > maps })
	moved("n1")
	if n := w.fc.Calls("GET /v1/clusters") - clusters; n != 0 {
		t.Errorf("the reconnect asked for the clusters again (%d times)", n)
	}
	if n := w.fc.Calls("PUT /v1/devices/{id}/clusters/{cid}") - joins; n != 0 {
		t.Errorf("the reconnect joined again (%d times)", n)
	}
}
