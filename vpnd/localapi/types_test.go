package localapi

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"
)

func TestWarningJSON(t *testing.T) {
	b, _ := json.Marshal(Status{Warnings: []Warning{{Code: WarnDNS, Message: "dns: boom"}}})
	if !bytes.Contains(b, []byte(`"warnings":[{"code":"dns","message":"dns: boom"}]`)) {
		t.Errorf("encoded %s", b)
	}
	// An older daemon's bare strings still decode (no code), next to the
	// objects of a newer one; null and an absent field are no warnings.
	var st Status
	err := json.Unmarshal([]byte(`{"warnings":["the session ends at 12:59 UTC",{"code":"session-expiring","message":"soon"}, "x" ]}`), &st)
	want := []Warning{{Message: "the session ends at 12:59 UTC"}, {Code: WarnSessionExpiring, Message: "soon"}, {Message: "x"}}
	if err != nil || !slices.Equal(st.Warnings, want) {
		t.Errorf("decoded %+v, %v", st.Warnings, err)
	}
	for _, in := range []string{`{"warnings":null}`, `{}`} {
		st = Status{}
		if err := json.Unmarshal([]byte(in), &st); err != nil || st.Warnings != nil {
			t.Errorf("%s: %+v %v", in, st.Warnings, err)
		}
	}
	for _, in := range []string{`{"warnings":[1]}`, `{"warnings":[{"code":2}]}`, `{"warnings":"dns"}`} {
		if err := json.Unmarshal([]byte(in), &st); err == nil {
			t.Errorf("%s decoded", in)
		}
	}
}

func TestAccessJSON(t *testing.T) {
	var st Status
	if err := json.Unmarshal([]byte(`{"seq":1}`), &st); err != nil || st.Access != nil {
		t.Errorf("an older daemon's status: access %+v, %v", st.Access, err)
	}
	b, _ := json.Marshal(Status{Access: &Access{Control: false, Reason: "r", Hint: "h"}})
	if !bytes.Contains(b, []byte(`"access":{"control":false,"reason":"r","hint":"h"}`)) {
		t.Errorf("encoded %s", b)
	}
}

// FuzzStatus decodes what a daemon sends (GET /v1/status, each line of
// /v1/watch) as the client does: whatever arrives, decoding does not
// panic, and what it accepts encodes to a document that decodes to itself.
func FuzzStatus(f *testing.F) {
	f.Add([]byte(`{"seq":3,"version":"v1","session":{"state":"signed-in","user":"alice@example.com","expiresAt":"2026-07-01T12:59:00Z"},` +
		`"tunnel":{"interface":"wg1","up":true,"addresses":["100.96.0.2/32"]},"dns":{"mode":"off"},` +
		`"clusters":[{"cid":"ky3","state":"connected","wanted":true,"peerUp":true,"lastHandshake":"2026-07-01T12:00:00+01:00","server":{"nodeId":"n1"},"dns":{"server":"","domains":[]}}],` +
		`"warnings":[{"code":"session-expiring","message":"the session ends at 2026-07-01 12:59 UTC"},{"code":"dns","message":"dns: boom"}],` +
		`"access":{"control":false,"reason":"bob (uid 1001) may only read the VPN status","hint":"ask an administrator to run: sudo runos vpn install --operator bob"}}`))
	f.Add([]byte(`{"warnings":["the session expired",{"code":"x"},null,"\u00e9"]}`))
	f.Add([]byte(`{"warnings":[{"code":"dns","message":"a","extra":[1,{}]}],"access":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var st Status
		if json.Unmarshal(b, &st) != nil {
			return
		}
		once, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", st, err)
		}
		var again Status
		if err := json.Unmarshal(once, &again); err != nil {
			t.Fatalf("re-decoding %s: %v", once, err)
		}
		twice, _ := json.Marshal(again)
		if !bytes.Equal(once, twice) {
			t.Fatalf("not stable:\n%s\n%s", once, twice)
		}
	})
}

// TestStatusFieldsAlwaysPresent: signed out and before a handshake, the
// documented fields are there (null or ""), and both forms round-trip.
func TestStatusFieldsAlwaysPresent(t *testing.T) {
	empty := Status{Session: Session{State: SessionSignedOut}, Clusters: []ClusterStatus{{CID: "ky3", State: ClusterConnecting}}}
	b, err := json.Marshal(empty)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"user":""`, `"expiresAt":null`, `"lastHandshake":null`, `"error":""`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("no %s in %s", want, b)
		}
	}
	at := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	full := Status{Session: Session{State: SessionSignedIn, User: "alice@example.com", ExpiresAt: at},
		Clusters: []ClusterStatus{{CID: "ky3", State: ClusterConnected, PeerUp: true, LastHandshake: at.Add(-time.Second)}}}
	for _, st := range []Status{empty, full} {
		b, _ := json.Marshal(st)
		var back Status
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !back.Session.ExpiresAt.Equal(st.Session.ExpiresAt) || back.Session.User != st.Session.User ||
			!back.Clusters[0].LastHandshake.Equal(st.Clusters[0].LastHandshake) || back.Clusters[0].CID != "ky3" {
			t.Errorf("round trip of %s gave %+v", b, back)
		}
	}
	if b, _ := json.Marshal(full); !bytes.Contains(b, []byte(`"expiresAt":"2026-12-02T18:00:00Z"`)) {
		t.Errorf("encoded %s", b)
	}
}
