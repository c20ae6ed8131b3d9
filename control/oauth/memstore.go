package oauth

import (
	"context"
	"errors"
	"sync"
	"time"
)

// memRetention is how long the memory store keeps an entry after it was put,
// whatever its ExpiresAt says: longer than any lifetime New allows, and
// measured on the real clock so that tests with a fake clock are unaffected.
const memRetention = 2 * time.Hour

// maxPendingDevices bounds device codes, which anyone may ask for.
const maxPendingDevices = 100000

type memStore struct {
	mu      sync.Mutex
	codes   map[string]memEntry[AuthCode]
	devices map[string]memEntry[DeviceCode] // by DeviceCodeHash
	byUser  map[string]string               // UserCode → DeviceCodeHash
	puts    int
}

type memEntry[T any] struct {
	v   T
	put time.Time
}

// NewMemoryStore returns a GrantStore kept in this process's memory, for
// tests and a single control process. Entries are dropped two hours after
// they were put.
func NewMemoryStore() GrantStore {
	return &memStore{
		codes:   make(map[string]memEntry[AuthCode]),
		devices: make(map[string]memEntry[DeviceCode]),
		byUser:  make(map[string]string),
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

func (m *memStore) PutDeviceCode(_ context.Context, d DeviceCode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	if len(m.devices) >= maxPendingDevices {
		return errors.New("oauth: too many pending device sign-ins")
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

func (m *memStore) UpdateDeviceCode(_ context.Context, d DeviceCode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.devices[d.DeviceCodeHash]
	if !ok {
		return ErrNotFound
	}
	if d.UserCode != e.v.UserCode {
		return errors.New("oauth: a device code's user code cannot change")
	}
	e.v = d
	m.devices[d.DeviceCodeHash] = e
	return nil
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
