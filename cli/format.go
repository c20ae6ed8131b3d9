package cli

import (
	"fmt"
	"time"
)

// fmtTime shows t in now's location: the time of day when it is today,
// else the date too. Tests pass a UTC clock, so output is stable.
func fmtTime(t, now time.Time) string {
	if t.IsZero() {
		return "an unknown time"
	}
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04 MST")
	}
	return t.Format("2006-01-02 15:04 MST")
}

// fmtDuration is a short human duration: 12s, 42m, 23h59m.
func fmtDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	h := int(d / time.Hour)
	m := int((d % time.Hour) / time.Minute)
	if h >= 48 {
		return fmt.Sprintf("%dd%dh", h/24, h%24)
	}
	if m == 0 {
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}

// fmtAgo is "12s ago", or "never" for the zero time.
func fmtAgo(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmtDuration(now.Sub(t)) + " ago"
}

// fmtMillis shows a short wait in milliseconds, a longer one in seconds.
func fmtMillis(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
