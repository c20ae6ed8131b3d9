package state

import (
	"time"

	"github.com/runos/vpn/vpnd/localapi"
	"github.com/runos/vpn/vpnd/wgcfg"
)

// A peer is up (peerUp) only while its server answers: a handshake within
// localapi.HandshakeFresh and no evidence that the server stopped
// answering. The evidence is silence while sending: the device has sent
// something (data, a keepalive, a handshake initiation or the engine's
// probe, which the server answers at once) at least answerWait ago and has
// received nothing for silentFor. WireGuard itself gives up on a session
// after about as long (keepalive 10 s + rekey 5 s) and starts a new
// handshake; the next handshake, or any byte back, makes the peer up again.
const (
	silentFor  = 15 * time.Second
	answerWait = 5 * time.Second
)

// heard is when the peer was last heard from: a byte received, or a handshake.
func heard(r wgcfg.PeerReport) time.Time {
	if r.LastReceive.After(r.LastHandshake) {
		return r.LastReceive
	}
	return r.LastHandshake
}

// silence says whether the peer stopped answering at now, and for how long
// nothing has come back.
func silence(r wgcfg.PeerReport, now time.Time) (time.Duration, bool) {
	h := heard(r)
	if r.SentSince.IsZero() || h.IsZero() || r.SentSince.Before(h) {
		return 0, false
	}
	quiet := now.Sub(h)
	return quiet, quiet >= silentFor && now.Sub(r.SentSince) >= answerWait
}

// answering is peerUp: a fresh handshake and no silence.
func answering(r wgcfg.PeerReport, now time.Time) bool {
	_, silent := silence(r, now)
	return fresh(r.LastHandshake, now) && !silent
}

func fresh(hs, now time.Time) bool {
	return !hs.IsZero() && now.Sub(hs) < localapi.HandshakeFresh
}

// Read intervals of the device (see ReadEvery).
const (
	readUp      = time.Second           // every wanted peer up: liveness is read this often
	readPending = 50 * time.Millisecond // some wanted peer has no fresh handshake or is silent
	readIdle    = 5 * time.Second       // no wanted peer
	readFastest = time.Millisecond
	// askedReadDivisor: while a handshake is awaited, the device is read
	// again after this fraction of the time since it was asked for.
	askedReadDivisor = 16
)

// ReadEvery is how soon the daemon reads the device again. Right after a
// peer was (re)created and while its handshake is awaited, a sixteenth of
// the time since (from 1 ms up to 50 ms): a handshake on a LAN takes a few
// ms and shows at most a sixteenth later. A read in process costs ~20 µs
// (wghost/uapi.go), so the ~60 reads of a connect's first 200 ms are
// cheap; a quarter (chosen when a read went through the UAPI socket, ~0.5
// ms) could leave a handshake done at 16 ms unseen until 20 ms, at the
// tail of connect → peerUp. (A handshake the tunnel initiated also wakes
// the read at once: vpnd/relay's OnHandshake; this schedule is for the
// rest.) While a wanted peer has no fresh handshake or
// is silent, 50 ms; while all are up, every second, which is what liveness
// needs; with no wanted peer, 5 s. These are local reads of the device,
// not network polls.
func ReadEvery(in *Inputs) time.Duration {
	peers := Want(in).Tunnel.Peers
	if len(peers) == 0 {
		return readIdle
	}
	every := readUp
	for _, pr := range peers {
		r, ok := in.Device.Peer(pr.PublicKey)
		switch {
		case !ok:
			every = min(every, readPending)
		case !r.HandshakeAsked.IsZero() && r.LastHandshake.Before(r.HandshakeAsked) && in.Now.Sub(r.HandshakeAsked) < 4*readPending:
			every = min(every, max(in.Now.Sub(r.HandshakeAsked)/askedReadDivisor, readFastest))
		case !up(in, r):
			every = min(every, readPending)
		}
	}
	return every
}
