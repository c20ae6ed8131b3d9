package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/audit"
	"github.com/runos/vpn/control/hub"
	"github.com/runos/vpn/control/model"
	"github.com/runos/vpn/control/rules"
	"github.com/runos/vpn/control/store"
	"github.com/runos/vpn/control/token"
)

// A move (docs/internals.md "Moves"):
//
//	preparing  the target's gateway is asked to stand by with every peer;
//	           fails if its node is no_heartbeat when asked, or it does not
//	           report listening within MoveReadyTimeout. Devices are told
//	           nothing until it does.
//	switching  one transaction gave the service the target's node, key and
//	           endpoint, and so changed every joined device's map; the old
//	           node drains. The target's handshake reports count devices.
//	done       every device handshaked with the target, or MoveDeadline
//	           passed; the old node stops serving.
//	failed     nothing changed for the devices; the target stops.

func step(m *model.Move, at time.Time, format string, args ...any) {
	m.Steps = append(m.Steps, api.MoveStep{At: at, Text: fmt.Sprintf(format, args...)})
}

func (s *Server) handleStartMove(w http.ResponseWriter, r *http.Request, p *principal) {
	var req api.MoveRequest
	if e := decode(r, &req); e != nil {
		writeError(w, e)
		return
	}
	now := s.now()
	var m model.Move
	var version uint64
	err := s.update(r.Context(), func(tx store.Writer) error {
		plan, mc, err := s.planMove(tx, p, r.PathValue("cid"), r.PathValue("id"), req)
		if err != nil {
			return err
		}
		if err := checkStartMove(mc); err != nil {
			return err
		}
		if version, err = tx.CommitVersion(); err != nil {
			return err
		}
		m = model.Move{ID: token.ID("mv"), CID: mc.c.CID, ServiceID: mc.svc.ID, FromNodeID: mc.from.NID, TargetNodeID: mc.to.NID,
			State: api.MovePreparing, Endpoint: plan.Endpoint, AddressKind: plan.AddressKind, Warnings: plan.Warnings,
			StartedAt: now, PrepareVersion: version}
		step(&m, now, "move of %s from %s to %s requested: devices will be given %s (%s)", mc.svc.ID, mc.from.NID, mc.to.NID, plan.Endpoint, plan.AddressKind)
		for _, wrn := range plan.Warnings {
			step(&m, now, "warning: %s", wrn)
		}
		tx.Touch(hub.Move(m.ID), hub.Service(mc.svc.ID))
		entry := audit.Entry{AIDs: []string{mc.c.AID}, Kind: audit.MoveRequested, CID: mc.c.CID, Target: m.ID,
			Outcome: fmt.Sprintf("%s from %s to %s: devices will be given %s (%s)", mc.svc.ID, mc.from.NID, mc.to.NID, plan.Endpoint, plan.AddressKind)}
		if st := s.heartbeats().Status(mc.to, now); st != api.NodeReady {
			m.State, m.FinishedAt = api.MoveFailed, now
			m.Error = fmt.Sprintf("%s is %s: its gateway is not running, so it cannot bring the server up; the move failed and no device was told anything",
				mc.to.NID, st)
			step(&m, now, "failed: %s", m.Error)
			entry.Outcome += "; failed at once: " + m.Error
			if err := s.record(tx, r, p, entry); err != nil {
				return err
			}
			return tx.PutMove(m)
		}
		step(&m, now, "asked %s's gateway to bring the server up (standby, with every current peer)", mc.to.NID)
		if s.heartbeats().Unheard(mc.to) {
			// Control came up moments ago: the target counts as ready on
			// its heartbeats before the outage, and the move waits for its
			// first report (within the prepare deadline) to know.
			step(&m, now, "control started %s ago and has not heard from %s since: waiting for its gateway's first report (up to %s)",
				now.Sub(s.upSince).Round(time.Second), mc.to.NID, s.cfg.MoveReadyTimeout)
		}
		tx.Touch(hub.Gateway(mc.c.CID, mc.to.NID))
		if err := s.record(tx, r, p, entry); err != nil {
			return err
		}
		return tx.PutMove(m)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("move started", "move", m.ID, "cid", m.CID, "service", m.ServiceID, "from", m.FromNodeID, "to", m.TargetNodeID, "state", m.State)
	if m.State == api.MovePreparing {
		s.afterStore("move-ready:"+m.ID, m.StartedAt.Add(s.cfg.MoveReadyTimeout), func() error { return s.moveReadyTimeout(m.ID) })
	}
	writeJSON(w, http.StatusCreated, moveDoc(m, version))
}

func checkStartMove(mc moveContext) error {
	if e := rules.CheckStartMove(mc.svc, mc.inFlight); e != nil {
		return e
	}
	return nil
}

// handleMove is GET of a move, long-pollable for --follow.
func (s *Server) handleMove(w http.ResponseWriter, r *http.Request, p *principal) {
	id := r.PathValue("id")
	s.longPoll(w, r, "move", p, func(ctx context.Context, p *principal) (doc, *api.Error) {
		var d api.Move
		final := false // done or failed: it will not change again
		err := s.st.View(ctx, func(rd store.Reader) error {
			m, err := rd.Move(id)
			if errors.Is(err, store.ErrNotFound) {
				return errNotFound("no move %s", id)
			} else if err != nil {
				return err
			}
			if _, err := cluster(rd, p, m.CID, noVerb); err != nil {
				return errNotFound("no move %s", id)
			}
			v, err := rd.TopicVersion(hub.Move(id))
			d, final = moveDoc(m, v), !m.InFlight()
			return err
		})
		if err != nil {
			return doc{}, s.asError(ctx, err)
		}
		return doc{body: d, version: d.Version, topics: []*hub.Topic{s.hub.Topic(hub.Move(id))}, final: final}, nil
	})
}

// armMoveTimers arms a move's timer from the store (after a restart, a
// takeover of the timers' lease, another replica's change). Its error is
// the store's: the caller tries again (a move left unarmed would never
// time out).
func (s *Server) armMoveTimers(ctx context.Context, id string) error {
	var m model.Move
	err := s.st.View(ctx, func(rd store.Reader) error {
		var err error
		m, err = rd.Move(id)
		return err
	})
	if err != nil {
		return fmt.Errorf("arm the timers of move %s: %w", id, err)
	}
	switch m.State {
	case api.MovePreparing:
		s.afterStore("move-ready:"+id, m.StartedAt.Add(s.cfg.MoveReadyTimeout), func() error { return s.moveReadyTimeout(id) })
	case api.MoveSwitching:
		s.afterStore("move-deadline:"+id, m.SwitchedAt.Add(s.cfg.MoveDeadline), func() error { return s.moveDeadline(id) })
	}
	return nil
}

func (s *Server) moveReadyTimeout(id string) error {
	ctx, cancel := s.bg()
	defer cancel()
	now := s.now()
	failed := false // the move was still preparing: not ready in time
	err := s.update(ctx, func(tx store.Writer) error {
		failed = false
		m, err := tx.Move(id)
		if err != nil || m.State != api.MovePreparing {
			return err
		}
		failed = true
		why := fmt.Sprintf("%s's gateway did not report the server listening within %s: the move failed and no device was told anything",
			m.TargetNodeID, s.cfg.MoveReadyTimeout)
		if n, err := tx.Node(m.CID, m.TargetNodeID); err == nil && s.heartbeats().Unheard(n) {
			why = fmt.Sprintf("%s's gateway has not reported since control started %s ago (is it running?) and did not bring the server up within %s: "+
				"the move failed and no device was told anything", m.TargetNodeID, now.Sub(s.upSince).Round(time.Second), s.cfg.MoveReadyTimeout)
		}
		failMove(tx, &m, now, why)
		if err := tx.UpdateMove(m); err != nil {
			return err
		}
		return recordMoveOutcome(tx, m, now)
	})
	if err != nil {
		s.log.Error("move ready timeout", "move", id, "err", err)
		return err
	}
	if failed { // a move that got ready in time is no news
		s.log.Warn("move failed: target not ready in time", "move", id)
	}
	return nil
}

func failMove(tx store.Writer, m *model.Move, now time.Time, why string) {
	m.State, m.Error, m.FinishedAt = api.MoveFailed, why, now
	step(m, now, "failed: %s", why)
	step(m, now, "%s stops standing by; devices keep %s", m.TargetNodeID, m.FromNodeID)
	tx.Touch(hub.Move(m.ID), hub.Service(m.ServiceID), hub.Gateway(m.CID, m.TargetNodeID))
}

func (s *Server) moveDeadline(id string) error {
	ctx, cancel := s.bg()
	defer cancel()
	now := s.now()
	err := s.update(ctx, func(tx store.Writer) error {
		m, err := tx.Move(id)
		if err != nil || m.State != api.MoveSwitching {
			return err
		}
		s.finishMove(tx, &m, now)
		if err := tx.UpdateMove(m); err != nil {
			return err
		}
		return recordMoveOutcome(tx, m, now)
	})
	if err != nil {
		s.log.Error("move deadline", "move", id, "err", err)
	}
	return err
}

// finishMove marks the move done: every device switched, or the deadline
// passed. The old node's role derives to nothing, so it stops serving.
func (s *Server) finishMove(tx store.Writer, m *model.Move, now time.Time) {
	m.State, m.FinishedAt = api.MoveDone, now
	if !m.LastHandshake.IsZero() {
		m.SwitchMs = max(m.LastHandshake.Sub(m.StartedAt).Milliseconds(), 0)
	}
	if m.Switched >= m.Total {
		step(m, now, "done: %d/%d devices switched to %s, %d ms from taking the move to the last handshake", min(m.Switched, m.Total), m.Total, m.TargetNodeID, m.SwitchMs)
	} else {
		step(m, now, "done at the %s deadline: %d/%d devices switched to %s; the others switch when they next reach control",
			s.cfg.MoveDeadline, m.Switched, m.Total, m.TargetNodeID)
	}
	step(m, now, "%s stops serving", m.FromNodeID)
	tx.Touch(hub.Move(m.ID), hub.Service(m.ServiceID), hub.Gateway(m.CID, m.FromNodeID))
	s.log.Info("move done", "move", m.ID, "switched", m.Switched, "total", m.Total, "switchMs", m.SwitchMs)
}

// onTargetReport advances a move from its target gateway's report, inside
// the report's transaction. It returns a function to run after the commit
// (arming the deadline), or nil.
func (s *Server) onTargetReport(tx store.Writer, m *model.Move, n model.Node, rep api.GatewayReport, now time.Time) (after func(), err error) {
	switch m.State {
	case api.MovePreparing:
		if rep.ServiceID != m.ServiceID || rep.MapVersion < m.PrepareVersion {
			return nil, nil // not yet about this standby map
		}
		if !rep.Listening {
			if rep.Error != "" {
				failMove(tx, m, now, fmt.Sprintf("%s's gateway could not bring the server up: %s; no device was told anything", n.NID, rep.Error))
				if err := tx.UpdateMove(*m); err != nil {
					return nil, err
				}
				return nil, recordMoveOutcome(tx, *m, now)
			}
			return nil, nil
		}
		if rep.PublicKey == "" {
			return nil, nil
		}
		return s.switchMove(tx, m, rep, now)
	case api.MoveSwitching:
		return nil, s.countHandshakes(tx, m, rep, now)
	}
	return nil, nil
}

// switchMove is step 2 of a move: one transaction gives the service the
// target's node and key, which changes every joined device's map.
func (s *Server) switchMove(tx store.Writer, m *model.Move, rep api.GatewayReport, now time.Time) (func(), error) {
	svc, err := tx.Service(m.ServiceID)
	if err != nil {
		return nil, err
	}
	// Counted, not read: this transaction is what every device waits for.
	total, err := tx.PeerCount(m.CID, now)
	if err != nil {
		return nil, err
	}
	svc.NodeID, svc.PublicKey, svc.State, svc.Error = m.TargetNodeID, rep.PublicKey, api.ServiceServing, ""
	if err := tx.UpdateService(svc); err != nil {
		return nil, err
	}
	m.State, m.SwitchedAt, m.Total = api.MoveSwitching, now, total
	step(m, now, "%s is listening with its own key; devices told: new node %s, key and endpoint %s", m.TargetNodeID, m.TargetNodeID, m.Endpoint)
	step(m, now, "%s drains: it keeps serving until every device has switched or %s pass", m.FromNodeID, s.cfg.MoveDeadline)
	tx.Touch(hub.Cluster(m.CID), hub.Service(svc.ID), hub.Move(m.ID), hub.Gateway(m.CID, m.FromNodeID), hub.Gateway(m.CID, m.TargetNodeID))
	if err := s.countHandshakes(tx, m, rep, now); err != nil {
		return nil, err
	}
	noDevices := m.State == api.MoveSwitching && m.Total == 0 // else countHandshakes recorded the end, if it came
	if noDevices {
		s.finishMove(tx, m, now)
	}
	if err := tx.UpdateMove(*m); err != nil {
		return nil, err
	}
	if noDevices {
		if err := recordMoveOutcome(tx, *m, now); err != nil {
			return nil, err
		}
	}
	s.log.Info("move switching", "move", m.ID, "to", m.TargetNodeID, "devices", m.Total)
	if m.State != api.MoveSwitching {
		return nil, nil
	}
	id := m.ID
	return func() {
		s.afterStore("move-deadline:"+id, now.Add(s.cfg.MoveDeadline), func() error { return s.moveDeadline(id) })
	}, nil
}

// countHandshakes counts devices that handshaked with the target since the
// move was asked for (a device cannot know the target's key before the
// switch, so any such handshake is a switched device).
func (s *Server) countHandshakes(tx store.Writer, m *model.Move, rep api.GatewayReport, now time.Time) error {
	if len(rep.Handshakes) == 0 || m.State != api.MoveSwitching {
		return nil
	}
	peers, err := tx.Peers(m.CID, now)
	if err != nil {
		return err
	}
	keys := make(map[string]bool, len(peers))
	for _, p := range peers {
		keys[p.PublicKey] = true
	}
	before := m.Switched
	for _, hs := range rep.Handshakes {
		if !keys[hs.PublicKey] || hs.At.Before(m.StartedAt) {
			continue
		}
		added, err := tx.AddMoveSwitched(m.ID, hs.PublicKey)
		if err != nil {
			return err
		}
		if !added {
			continue
		}
		m.Switched++
		at := hs.At
		if at.After(now) {
			at = now // a gateway clock ahead of ours does not make the move look slower
		}
		if at.After(m.LastHandshake) {
			m.LastHandshake = at
		}
	}
	if m.Switched == before {
		return nil
	}
	tx.Touch(hub.Move(m.ID))
	if m.Switched >= m.Total {
		s.finishMove(tx, m, now)
	}
	if err := tx.UpdateMove(*m); err != nil {
		return err
	}
	if m.State == api.MoveDone {
		return recordMoveOutcome(tx, *m, now)
	}
	return nil
}

// recordMoveOutcome records how a move ended, in the name of whoever asked
// for it (their move.requested entry says who): control reached the
// outcome, but the change is theirs.
func recordMoveOutcome(tx store.Writer, m model.Move, now time.Time) error {
	aids, err := clusterAccount(tx, m.CID)
	if err != nil {
		return err
	}
	e := audit.Entry{At: now, AIDs: aids, Actor: audit.Control, CID: m.CID, Target: m.ID}
	if req, err := tx.AuditEntries(store.AuditFilter{AIDs: aids, Kind: audit.MoveRequested, Target: m.ID, Limit: 1}); err != nil {
		return err
	} else if len(req) == 1 {
		e.Actor, e.Source = req[0].Actor, req[0].Source
	}
	switch m.State {
	case api.MoveDone:
		e.Kind = audit.MoveDone
		e.Outcome = fmt.Sprintf("%s now on %s: %d/%d devices switched", m.ServiceID, m.TargetNodeID, min(m.Switched, m.Total), m.Total)
		if m.SwitchMs > 0 {
			e.Outcome += fmt.Sprintf(" in %d ms", m.SwitchMs)
		}
	default:
		e.Kind, e.Outcome = audit.MoveFailed, m.Error
	}
	return audit.Record(tx, e)
}
