// Package storetest checks that an oauth.GrantStore keeps the contract the
// authorization server relies on: codes taken once, device codes found by
// either key, decided once and never undone by a poll, capped while
// pending; counters updated atomically; missing entries reported as
// oauth.ErrNotFound. Every GrantStore (the memory store, control's SQLite
// and PostgreSQL stores) runs it from its own tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/runos/vpn/control/oauth"
)

// Run runs the contract against stores made by open, one per subtest.
func Run(t *testing.T, open func(t *testing.T) oauth.GrantStore) {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

	t.Run("auth code taken once", func(t *testing.T) {
		s := open(t)
		c := oauth.AuthCode{CodeHash: "h1", ClientID: "runos-cli", RedirectURI: "http://127.0.0.1:5000/cb",
			CodeChallenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", User: "alice@example.com", ExpiresAt: at}
		if err := s.PutAuthCode(ctx, c); err != nil {
			t.Fatal(err)
		}
		got, err := s.TakeAuthCode(ctx, "h1")
		if err != nil {
			t.Fatal(err)
		}
		if got.ClientID != c.ClientID || got.RedirectURI != c.RedirectURI || got.CodeChallenge != c.CodeChallenge ||
			got.User != c.User || !got.ExpiresAt.Equal(c.ExpiresAt) || got.CodeHash != c.CodeHash {
			t.Fatalf("took %+v, put %+v", got, c)
		}
		if _, err := s.TakeAuthCode(ctx, "h1"); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("second take: %v, want ErrNotFound", err)
		}
		if _, err := s.TakeAuthCode(ctx, "never"); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("unknown code: %v, want ErrNotFound", err)
		}
	})

	t.Run("concurrent takes", func(t *testing.T) {
		s := open(t)
		if err := s.PutAuthCode(ctx, oauth.AuthCode{CodeHash: "race", ClientID: "runos-cli", ExpiresAt: at}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for range 16 {
			wg.Go(func() {
				if _, err := s.TakeAuthCode(ctx, "race"); err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d takes of one code succeeded, want 1", wins)
		}
	})

	t.Run("device codes", func(t *testing.T) {
		s := open(t)
		d := oauth.DeviceCode{DeviceCodeHash: "d1", UserCode: "BCDF-GHJK", ClientID: "runos-cli", ExpiresAt: at, Interval: 5 * time.Second}
		if err := s.PutDeviceCode(ctx, d, at.Add(-time.Minute), 100); err != nil {
			t.Fatal(err)
		}
		for name, get := range map[string]func() (oauth.DeviceCode, error){
			"by user code": func() (oauth.DeviceCode, error) { return s.DeviceCodeByUserCode(ctx, "BCDF-GHJK") },
			"by hash":      func() (oauth.DeviceCode, error) { return s.DeviceCodeByHash(ctx, "d1") },
		} {
			got, err := get()
			if err != nil || !same(got, d) {
				t.Fatalf("%s: %+v, %v; want %+v", name, got, err, d)
			}
		}
		// A poll writes its time and interval only.
		polled := at.Add(-time.Minute)
		got, err := s.PollDeviceCode(ctx, "d1", func(c oauth.DeviceCode) (time.Time, time.Duration) {
			if !same(c, d) {
				t.Errorf("poll given %+v, want %+v", c, d)
			}
			return polled, 10 * time.Second
		})
		d.LastPoll, d.Interval = polled, 10*time.Second
		if err != nil || !same(got, d) {
			t.Fatalf("after a poll: %+v, %v; want %+v", got, err, d)
		}
		// Deciding is once, and only before expiry.
		if _, err := s.DecideDeviceCode(ctx, "BCDF-GHJK", "alice@example.com", true, at); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("decided at expiry: %v, want ErrNotFound", err)
		}
		got, err = s.DecideDeviceCode(ctx, "BCDF-GHJK", "alice@example.com", true, at.Add(-time.Second))
		d.Approved, d.User = true, "alice@example.com"
		if err != nil || !same(got, d) {
			t.Fatalf("approved: %+v, %v; want %+v", got, err, d)
		}
		if _, err := s.DecideDeviceCode(ctx, "BCDF-GHJK", "mallory@example.com", false, at.Add(-time.Second)); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("decided twice: %v, want ErrNotFound", err)
		}
		// A later poll leaves the decision as it is.
		if got, err := s.PollDeviceCode(ctx, "d1", func(c oauth.DeviceCode) (time.Time, time.Duration) { return at, c.Interval }); err != nil || !got.Approved || got.User != "alice@example.com" {
			t.Fatalf("poll after approval: %+v, %v", got, err)
		}
		if err := s.DeleteDeviceCode(ctx, "d1"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteDeviceCode(ctx, "d1"); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		if _, err := s.DeviceCodeByUserCode(ctx, "BCDF-GHJK"); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("by user code after delete: %v", err)
		}
		if _, err := s.DeviceCodeByHash(ctx, "d1"); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("by hash after delete: %v", err)
		}
		if _, err := s.PollDeviceCode(ctx, "d1", func(c oauth.DeviceCode) (time.Time, time.Duration) { return at, c.Interval }); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("poll after delete: %v, want ErrNotFound", err)
		}
		if _, err := s.DecideDeviceCode(ctx, "BCDF-GHJK", "alice@example.com", true, at.Add(-time.Second)); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("decide after delete: %v, want ErrNotFound", err)
		}
	})

	t.Run("approval never lost to a racing poll", func(t *testing.T) {
		s := open(t)
		if err := s.PutDeviceCode(ctx, oauth.DeviceCode{DeviceCodeHash: "d3", UserCode: "DFGH-JKLM", ClientID: "runos-cli",
			ExpiresAt: at, Interval: time.Second}, at.Add(-time.Hour), 100); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := s.PollDeviceCode(ctx, "d3", func(c oauth.DeviceCode) (time.Time, time.Duration) {
						return at.Add(-time.Minute), c.Interval + time.Second
					}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		if _, err := s.DecideDeviceCode(ctx, "DFGH-JKLM", "alice@example.com", true, at.Add(-time.Minute)); err != nil {
			t.Error(err)
		}
		close(stop)
		wg.Wait()
		if got, err := s.DeviceCodeByHash(ctx, "d3"); err != nil || !got.Approved || got.User != "alice@example.com" {
			t.Fatalf("after polls raced the approval: %+v, %v", got, err)
		}
	})

	t.Run("pending device codes capped", func(t *testing.T) {
		s := open(t)
		put := func(i int, exp, now time.Time) error {
			return s.PutDeviceCode(ctx, oauth.DeviceCode{DeviceCodeHash: fmt.Sprint("cap", i), UserCode: fmt.Sprintf("CAPS-%04d", i),
				ClientID: "runos-cli", ExpiresAt: exp}, now, 3)
		}
		now := at.Add(-time.Hour)
		if err := put(0, now.Add(time.Minute), now); err != nil { // expires first
			t.Fatal(err)
		}
		for i := 1; i < 3; i++ {
			if err := put(i, at, now); err != nil {
				t.Fatal(err)
			}
		}
		if err := put(3, at, now); !errors.Is(err, oauth.ErrTooMany) {
			t.Fatalf("a fourth pending code with a cap of 3: %v, want ErrTooMany", err)
		}
		// Once the first has expired it no longer counts, and in time it is gone.
		later := now.Add(3 * time.Minute)
		if err := put(4, at, later); err != nil {
			t.Fatalf("after one expired: %v", err)
		}
		if _, err := s.DeviceCodeByHash(ctx, "cap0"); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("a code expired two minutes ago is still kept: %v", err)
		}
	})

	t.Run("counters", func(t *testing.T) {
		s := open(t)
		keys := []string{"a:192.0.2.1", "u:alice"}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				err := s.Count(ctx, at, keys, func(cur []oauth.Counter) []oauth.Counter {
					next := make([]oauth.Counter, len(cur))
					for i, c := range cur {
						next[i] = oauth.Counter{N: c.N + 1, First: at, Last: at, Expires: at.Add(time.Hour)}
					}
					return next
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		read := func(now time.Time, keys ...string) []oauth.Counter {
			var got []oauth.Counter
			if err := s.Count(ctx, now, keys, func(cur []oauth.Counter) []oauth.Counter { got = cur; return cur }); err != nil {
				t.Fatal(err)
			}
			return got
		}
		got := read(at, "u:alice", "a:192.0.2.1", "u:bob")
		if got[0].N != 20 || got[1].N != 20 || got[2].N != 0 || !got[0].Last.Equal(at) || !got[0].Expires.Equal(at.Add(time.Hour)) {
			t.Fatalf("after 20 counts at once: %+v, want 20, 20 and none", got)
		}
		_ = s.Count(ctx, at, []string{"u:alice"}, func([]oauth.Counter) []oauth.Counter { return []oauth.Counter{{}} })
		if got := read(at, "u:alice", "a:192.0.2.1"); got[0].N != 0 || got[1].N != 20 {
			t.Fatalf("after deleting u:alice: %+v", got)
		}
		if got := read(at.Add(time.Hour), "a:192.0.2.1"); got[0].N != 0 {
			t.Fatalf("an expired counter reads %+v", got[0])
		}
	})

	t.Run("concurrent deletes", func(t *testing.T) {
		s := open(t)
		if err := s.PutDeviceCode(ctx, oauth.DeviceCode{DeviceCodeHash: "d2", UserCode: "CDFG-HJKL", ClientID: "runos-cli", ExpiresAt: at}, at.Add(-time.Hour), 100); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for range 16 {
			wg.Go(func() {
				if err := s.DeleteDeviceCode(ctx, "d2"); err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d deletes of one device code succeeded, want 1 (an approval must be redeemed once)", wins)
		}
	})

	t.Run("many pending", func(t *testing.T) {
		s := open(t)
		for i := range 200 {
			d := oauth.DeviceCode{DeviceCodeHash: fmt.Sprint("h", i), UserCode: fmt.Sprintf("CODE-%04d", i), ClientID: "runos-cli", ExpiresAt: at}
			if err := s.PutDeviceCode(ctx, d, at.Add(-time.Hour), 1000); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.DeviceCodeByUserCode(ctx, "CODE-0123")
		if err != nil || got.DeviceCodeHash != "h123" {
			t.Fatalf("by user code among many: %+v, %v", got, err)
		}
	})
}

func same(a, b oauth.DeviceCode) bool {
	return a.DeviceCodeHash == b.DeviceCodeHash && a.UserCode == b.UserCode && a.ClientID == b.ClientID &&
		a.User == b.User && a.Approved == b.Approved && a.Denied == b.Denied && a.ExpiresAt.Equal(b.ExpiresAt) &&
		a.Interval == b.Interval && a.LastPoll.Equal(b.LastPoll)
}
