package oauth

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/runos/vpn/control/lru"
)

// memRetention is how long the memory store keeps an entry after it was put,
// whatever its ExpiresAt says: longer than any lifetime New allows, and
// measured on the real clock so that tests with a fake clock are unaffected.
const memRetention = 2 * time.Hour

// maxCounters bounds the memory store's slow-down counters: when full the
// least recently counted key is forgotten (a guesser who fills it with
// fresh keys only forgets the oldest, and every key is bounded anyway).
const maxCounters = 100000

type memStore struct {
	mu       sync.Mutex
	codes    map[string]memEntry[AuthCode]
	devices  map[string]memEntry[DeviceCode] // by DeviceCodeHash
	byUser   map[string]string               // UserCode → DeviceCodeHash
	puts     int
	counters *lru.Cache[string, Counter]
}

type memEntry[T any] struct {
	v   T
	put time.Time
}

// NewMemoryStore returns a GrantStore kept in this process's memory, for
// tests and programs that run the authorization server alone. Entries are
// dropped two hours after they were put. Control keeps its grants in its
// store instead, shared by every replica.
func NewMemoryStore() GrantStore {
	return &memStore{
		codes:    make(map[string]memEntry[AuthCode]),
		devices:  make(map[string]memEntry[DeviceCode]),
		byUser:   make(map[string]string),
		counters: lru.New[string, Counter](maxCounters),
	}
}

func (m *memStore) PutAuthCode(_ context.Context, c AuthCode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	m.codes[c.CodeHash] = memEntry[AuthCode]{c, time.Now()}
	return nil
}

func (m *memStore) TakeAuthCode(_ context.Context, codeHash string) (AuthCode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.codes[codeHash]
	if !ok {
		return AuthCode{}, ErrNotFound
	}
	delete(m.codes, codeHash)
	return e.v, nil
}

func (m *memStore) PutDeviceCode(_ context.Context, d DeviceCode, now time.Time, maxPending int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	pending := 0
	for h, e := range m.devices {
		if !now.Before(e.v.ExpiresAt.Add(time.Minute)) {
			delete(m.devices, h)
			delete(m.byUser, e.v.UserCode)
		} else if now.Before(e.v.ExpiresAt) {
			pending++
		}
	}
	if pending >= maxPending {
		return ErrTooMany
	}
	if _, taken := m.byUser[d.UserCode]; taken {
		return errors.New("oauth: user code already pending")
	}
	m.devices[d.DeviceCodeHash] = memEntry[DeviceCode]{d, time.Now()}
	m.byUser[d.UserCode] = d.DeviceCodeHash
	return nil
}

func (m *memStore) DeviceCodeByUserCode(_ context.Context, userCode string) (DeviceCode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.byUser[userCode]
	if !ok {
		return DeviceCode{}, ErrNotFound
	}
	return m.devices[h].v, nil
}

func (m *memStore) DeviceCodeByHash(_ context.Context, hash string) (DeviceCode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.devices[hash]
	if !ok {
		return DeviceCode{}, ErrNotFound
	}
	return e.v, nil
}

func (m *memStore) DecideDeviceCode(_ context.Context, userCode, user string, approve bool, now time.Time) (DeviceCode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.byUser[userCode]
	if !ok {
		return DeviceCode{}, ErrNotFound
	}
	e := m.devices[h]
	if e.v.Approved || e.v.Denied || !now.Before(e.v.ExpiresAt) {
		return DeviceCode{}, ErrNotFound
	}
	e.v.Approved, e.v.Denied = approve, !approve
	if approve {
		e.v.User = user
	}
	m.devices[h] = e
	return e.v, nil
}

func (m *memStore) PollDeviceCode(_ context.Context, hash string, poll func(DeviceCode) (time.Time, time.Duration)) (DeviceCode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.devices[hash]
	if !ok {
		return DeviceCode{}, ErrNotFound
	}
	e.v.LastPoll, e.v.Interval = poll(e.v)
	m.devices[hash] = e
	return e.v, nil
}

func (m *memStore) DeleteDeviceCode(_ context.Context, hash string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.devices[hash]
	if !ok {
		return ErrNotFound
	}
	delete(m.devices, hash)
	delete(m.byUser, e.v.UserCode)
	return nil
}

func (m *memStore) Count(_ context.Context, now time.Time, keys []string, fn func([]Counter) []Counter) error {
	m.mu.Lock() // one lock for every key: Count of several keys is one step
	defer m.mu.Unlock()
	cur := make([]Counter, len(keys))
	for i, k := range keys {
		if c, ok := m.counters.Get(k); ok && now.Before(c.Expires) {
			cur[i] = c
		}
	}
	next := fn(cur)
	for i, k := range keys {
		if next[i].Expires.IsZero() || !now.Before(next[i].Expires) {
			m.counters.Delete(k)
		} else {
			m.counters.Put(k, next[i])
		}
	}
	return nil
}

// pruneLocked drops old entries every 64 puts, keeping puts O(1) amortised.
func (m *memStore) pruneLocked() {
	m.puts++
	if m.puts%64 != 0 {
		return
	}
	cutoff := time.Now().Add(-memRetention)
	for h, e := range m.codes {
		if e.put.Before(cutoff) {
			delete(m.codes, h)
		}
	}
	for h, e := range m.devices {
		if e.put.Before(cutoff) {
			delete(m.devices, h)
			delete(m.byUser, e.v.UserCode)
		}
	}
}
