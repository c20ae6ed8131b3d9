package server

import (
	"fmt"
	"time"

	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/store"
)

// Idle clean-up: a device with no live session whose last sign of life
// (registered, seen by control, a handshake, revoked) is older than
// DeviceIdleTTL is deleted and its address goes back to the pool. One
// timer, armed for the oldest such device's deadline, as session expiry
// is: acted on when it is due, not by a sweep. A device only becomes a
// candidate when its session closes, which re-arms the timer
// (afterSessionsClosed); activity only moves deadlines later, so a timer
// that fires early finds nothing due and re-arms.

const idleKey = "device-idle"

// idleBatch bounds the devices deleted in one transaction.
const idleBatch = 200

// afterSessionsClosed re-arms the idle clean-up after sessions closed.
func (s *Server) afterSessionsClosed() { s.armIdleFromStore(s.now(), 0) }

// armIdle makes sure the idle clean-up runs no later than at.
func (s *Server) armIdle(at time.Time) {
	s.mu.Lock()
	if armed := s.idleAt; !s.leading || !armed.IsZero() && !at.Before(armed) {
		s.mu.Unlock()
		return
	}
	s.idleAt = at
	s.mu.Unlock()
	s.after(idleKey, at, s.cleanIdle)
}

// armIdleFromStore arms the timer for the oldest candidate's deadline, but
// not before now+floor: after a clean-up run, what is still due then was
// not deleted (the store disagreeing with itself), and waits a minute
// rather than looping.
func (s *Server) armIdleFromStore(now time.Time, floor time.Duration) {
	ctx, cancel := s.bg()
	defer cancel()
	var next time.Time
	var ok bool
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		next, ok, err = r.NextIdle(now)
		return err
	})
	switch {
	case err != nil:
		s.log.Error("next idle device", "err", err)
		s.armIdle(now.Add(time.Minute)) // try again soon rather than never
	case ok:
		at := next.Add(s.cfg.DeviceIdleTTL)
		if earliest := now.Add(floor); at.Before(earliest) {
			at = earliest
		}
		s.armIdle(at)
	}
}

// cleanIdle deletes the devices idle past the TTL, each with its audit
// entry, then arms the timer for the next.
func (s *Server) cleanIdle() {
	ctx, cancel := s.bg()
	defer cancel()
	s.mu.Lock()
	s.idleAt = time.Time{}
	s.mu.Unlock()
	ttl := s.cfg.DeviceIdleTTL
	for {
		now := s.now() // the clock may move between batches
		var gone []model.Device
		err := s.update(ctx, func(tx store.Writer) error {
			ds, err := tx.IdleDevices(now.Add(-ttl), now, idleBatch)
			if err != nil {
				return err
			}
			for _, d := range ds {
				aids, err := deviceAccounts(tx, d)
				if err != nil {
					return err
				}
				if err := deleteDevice(tx, d); err != nil {
					return err
				}
				err = audit.Record(tx, audit.Entry{At: now, AIDs: aids, Actor: audit.Control, Kind: audit.DeviceDeleted, Target: d.ID,
					Outcome: fmt.Sprintf("%s (%s of %s) idle since %s, no session and no handshake for %s: deleted, address %s freed",
						d.Name, d.OS, d.User, d.LastActive().UTC().Format(time.RFC3339), ttl, d.Address)})
				if err != nil {
					return err
				}
			}
			gone = ds
			return nil
		})
		if err != nil {
			s.log.Error("idle clean-up", "err", err)
			s.armIdle(now.Add(time.Minute)) // try again soon rather than never
			return
		}
		for _, d := range gone {
			s.log.Info("idle device deleted", "device", d.ID, "user", d.User, "address", d.Address, "lastActive", d.LastActive())
		}
		if len(gone) < idleBatch {
			s.armIdleFromStore(now, time.Minute)
			return
		}
	}
}
