package cli

import (
	"regexp"
	"strings"
)

// redactor removes secrets from what goes into a bug report: no private
// key, access or operator token, password or cookie may leave the machine
// in it. The CLI never holds the daemon's secrets, so it works by their
// shape: every run of 40 or more base64, base64url or hex characters
// (keys, tokens and their hashes, and any of them encoded once more) is
// replaced, except the public keys the report names on purpose; and the
// value of anything labelled a password, token, secret, cookie,
// authorization or private key.
type redactor struct {
	keep map[string]bool // public keys, shown as they are
}

const redacted = "[REDACTED]"

var (
	// A long run of key-ish characters; trailing '=' padding goes with it.
	secretRun = regexp.MustCompile(`[A-Za-z0-9+/_\-]{40,}={0,2}`)
	// label = value, label: value, "label": "value" (JSON), header lines.
	labelled = regexp.MustCompile(`(?i)((?:password|passwd|pass|secret|token|cookie|authorization|private[ _-]?key|preshared[ _-]?key)[A-Za-z_]*["']?\s*[:=]\s*["']?)(?:bearer\s+)?([^\s"',;}]+)`)
	bearer   = regexp.MustCompile(`(?i)(bearer\s+)([^\s"',;}]+)`)
)

func newRedactor(publicKeys ...string) *redactor {
	r := &redactor{keep: map[string]bool{}}
	for _, k := range publicKeys {
		if k != "" {
			r.keep[k] = true
		}
	}
	return r
}

// redact returns s with every secret replaced.
func (r *redactor) redact(s string) string {
	s = labelled.ReplaceAllStringFunc(s, func(m string) string {
		sub := labelled.FindStringSubmatch(m)
		if sub[2] == redacted || r.keep[sub[2]] || isHarmlessValue(sub[2]) {
			return m
		}
		return sub[1] + redacted
	})
	s = bearer.ReplaceAllString(s, "${1}"+redacted)
	return secretRun.ReplaceAllStringFunc(s, func(m string) string {
		if r.keep[m] || !mixed(m) {
			return m
		}
		return redacted
	})
}

// isHarmlessValue: labels whose values say nothing secret (an empty
// value, a boolean, a placeholder).
func isHarmlessValue(v string) bool {
	switch strings.ToLower(v) {
	case "", "true", "false", "null", "none", "(hidden)", "[redacted]":
		return true
	}
	return false
}

// mixed says whether a run has at least two kinds of characters (upper,
// lower, digit): keys and tokens do, while long words, paths of lower-case
// names and runs of one letter do not.
func mixed(s string) bool {
	var up, low, dig bool
	for _, c := range s {
		switch {
		case 'A' <= c && c <= 'Z':
			up = true
		case 'a' <= c && c <= 'z':
			low = true
		case '0' <= c && c <= '9':
			dig = true
		}
	}
	n := 0
	for _, b := range []bool{up, low, dig} {
		if b {
			n++
		}
	}
	return n >= 2
}
