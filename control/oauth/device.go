package oauth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runos/vpn/api"
	"github.com/runos/vpn/control/token"
)

// userCodeAlphabet has no vowels (no words spelled by accident) and no
// easily confused letters or digits (RFC 8628 §6.1): 20^8 ≈ 2^34 codes.
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

func newUserCode() string {
	var b strings.Builder
	for i := range 8 {
		if i == 4 {
			b.WriteByte('-')
		}
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(userCodeAlphabet))))
		b.WriteByte(userCodeAlphabet[n.Int64()])
	}
	return b.String()
}

// normalizeUserCode turns what a user typed into the canonical XXXX-XXXX,
// forgiving case, spaces and dashes; "" if it cannot be a user code.
func normalizeUserCode(in string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(in) {
		switch {
		case r == '-' || r == ' ' || r == '\t':
		case r < 0x80 && strings.IndexByte(userCodeAlphabet, byte(r)) >= 0:
			if b.Len() == 8 {
				return ""
			}
			b.WriteRune(r)
		default:
			return ""
		}
	}
	if b.Len() != 8 {
		return ""
	}
	s := b.String()
	return s[:4] + "-" + s[4:]
}

// deviceCode is POST /oauth/device/code (RFC 8628 §3.1, §3.2).
func (s *Server) deviceCode(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeTokenError(w, &tokenError{status: http.StatusMethodNotAllowed, code: "invalid_request", desc: "use POST"})
		return
	}
	p, err := readForm(w, r)
	if err != nil {
		writeTokenError(w, badRequest("invalid_request", err.Error()))
		return
	}
	client, terr := clientOf(r, p)
	if terr != nil {
		writeTokenError(w, terr)
		return
	}
	now := s.now()
	// Anyone may ask, so each address gets a few codes per window, and
	// the codes pending at once are capped: a flood costs a counter's
	// update, not a row per request, and sign-ins of others go on.
	wait, err := s.deviceCodeLimit(r.Context(), r.RemoteAddr, now)
	if err != nil {
		writeTokenError(w, s.serverError(r, "count device codes", err))
		return
	}
	if wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeTokenError(w, &tokenError{status: http.StatusTooManyRequests, code: "slow_down",
			desc: fmt.Sprintf("too many device sign-ins started from this address; try again in %s", plural(secs, "second"))})
		return
	}
	deviceCode := token.New()
	d := DeviceCode{
		DeviceCodeHash: token.Hash(deviceCode),
		ClientID:       client,
		ExpiresAt:      now.Add(s.cfg.DeviceCodeTTL),
		Interval:       s.cfg.DeviceInterval,
	}
	// A user code must name one pending device; collisions are rare, so a
	// few draws settle it.
	for range 5 {
		d.UserCode = newUserCode()
		if _, err = s.cfg.Store.DeviceCodeByUserCode(r.Context(), d.UserCode); errors.Is(err, ErrNotFound) {
			break
		}
	}
	if errors.Is(err, ErrNotFound) {
		err = s.cfg.Store.PutDeviceCode(r.Context(), d, now, s.cfg.MaxPendingDevices)
	} else if err == nil {
		err = errors.New("no free user code")
	}
	if errors.Is(err, ErrTooMany) {
		s.log.Warn("oauth: device code refused: too many pending", "max", s.cfg.MaxPendingDevices, "addr", r.RemoteAddr)
		w.Header().Set("Retry-After", "60")
		writeTokenError(w, &tokenError{status: http.StatusServiceUnavailable, code: "temporarily_unavailable",
			desc: "too many device sign-ins are pending; try again in a minute"})
		return
	}
	if err != nil {
		writeTokenError(w, s.serverError(r, "store device code", err))
		return
	}
	verify := s.endpoint(api.PathDeviceVerify)
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code":               deviceCode,
		"user_code":                 d.UserCode,
		"verification_uri":          verify,
		"verification_uri_complete": verify + "?" + url.Values{"user_code": {d.UserCode}}.Encode(),
		"expires_in":                int64(s.cfg.DeviceCodeTTL / time.Second),
		"interval":                  int64(d.Interval / time.Second),
	})
}

// grantDevice answers a device's token poll (RFC 8628 §3.4, §3.5).
func (s *Server) grantDevice(r *http.Request, p params, client string) (string, time.Time, *tokenError) {
	code := p["device_code"]
	if code == "" {
		return "", time.Time{}, badRequest("invalid_request", "device_code is missing")
	}
	ctx, now := r.Context(), s.now()
	// One step records the poll (and a slow-down) without rewriting the
	// decision, so an approval made while this poll runs is never lost.
	early := false
	d, err := s.cfg.Store.PollDeviceCode(ctx, token.Hash(code), func(d DeviceCode) (time.Time, time.Duration) {
		if d.ClientID != client {
			return d.LastPoll, d.Interval // refused below; not a poll of this code
		}
		// Polls arrive up to a network jitter early even from a
		// well-behaved client ticking at the interval, so a quarter of it
		// is forgiven.
		early = !d.LastPoll.IsZero() && now.Sub(d.LastPoll) < d.Interval-d.Interval/4
		if early {
			return now, d.Interval + 5*time.Second // RFC 8628 §3.5: for this and all later polls
		}
		return now, d.Interval
	})
	if errors.Is(err, ErrNotFound) {
		return "", time.Time{}, badRequest("invalid_grant", "the device code is unknown or was already used")
	}
	if err != nil {
		return "", time.Time{}, s.serverError(r, "record a device code poll", err)
	}
	if d.ClientID != client {
		return "", time.Time{}, badRequest("invalid_grant", "the device code was issued to another client")
	}
	if !now.Before(d.ExpiresAt) {
		_ = s.cfg.Store.DeleteDeviceCode(ctx, d.DeviceCodeHash)
		return "", time.Time{}, badRequest("expired_token", "the code expired before it was approved; start the sign-in again")
	}
	if d.Denied {
		_ = s.cfg.Store.DeleteDeviceCode(ctx, d.DeviceCodeHash)
		return "", time.Time{}, badRequest("access_denied", "the sign-in was denied in the browser")
	}
	if d.Approved && !early {
		// Deleting first makes the approval redeemable once, even when two
		// polls race: only the one whose delete succeeds gets a session.
		if err := s.cfg.Store.DeleteDeviceCode(ctx, d.DeviceCodeHash); errors.Is(err, ErrNotFound) {
			return "", time.Time{}, badRequest("invalid_grant", "the device code was already used")
		} else if err != nil {
			return "", time.Time{}, s.serverError(r, "delete device code", err)
		}
		return s.startSession(r, d.User, client, "")
	}
	if early {
		return "", time.Time{}, badRequest("slow_down", "polling faster than the interval; wait 5 seconds more between polls")
	}
	return "", time.Time{}, badRequest("authorization_pending", "waiting for the user to approve the sign-in")
}
