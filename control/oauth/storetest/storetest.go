// Package storetest checks that an oauth.GrantStore keeps the contract the
// authorization server relies on: codes taken once, device codes found by
// either key, updates and deletes of missing entries reported as
// oauth.ErrNotFound. Every GrantStore (the memory store, control's SQLite
// store) runs it from its own tests.
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
		if err := s.PutDeviceCode(ctx, d); err != nil {
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
		d.Approved, d.User, d.LastPoll, d.Interval = true, "alice@example.com", at.Add(-time.Minute), 10*time.Second
		if err := s.UpdateDeviceCode(ctx, d); err != nil {
			t.Fatal(err)
		}
		if got, err := s.DeviceCodeByHash(ctx, "d1"); err != nil || !same(got, d) {
			t.Fatalf("after update: %+v, %v; want %+v", got, err, d)
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
		if err := s.UpdateDeviceCode(ctx, d); !errors.Is(err, oauth.ErrNotFound) {
			t.Fatalf("update after delete: %v, want ErrNotFound", err)
		}
	})

	t.Run("concurrent deletes", func(t *testing.T) {
		s := open(t)
		if err := s.PutDeviceCode(ctx, oauth.DeviceCode{DeviceCodeHash: "d2", UserCode: "CDFG-HJKL", ClientID: "runos-cli", ExpiresAt: at}); err != nil {
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
			if err := s.PutDeviceCode(ctx, d); err != nil {
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
