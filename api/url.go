package api

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// FlagInsecureHTTP is the flag, the same in every program, that lets that
// process talk to (or, for runos-control, serve) a plain-HTTP control. It is
// for tests only: over http:// the bearer tokens travel in clear text.
const FlagInsecureHTTP = "insecure-http"

// ErrPlainHTTP is wrapped by ParseControlURL's refusal of an http:// URL.
var ErrPlainHTTP = errors.New("plain http:// sends the tokens in clear text")

// ParseControlURL is the one check of a control URL (the CLI's api-url,
// the session the daemon is handed, the gateway's --control, control's own
// --issuer): https://host[:port], with no user, path, query or fragment (the
// API and OAuth live at fixed paths from the root). A trailing slash is
// dropped. http:// is accepted only with allowHTTP, which a process gets
// from --insecure-http given to it at start, never from a request.
func ParseControlURL(raw string, allowHTTP bool) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", fmt.Errorf("control URL %q: want https://host[:port]", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.TrimRight(u.Path, "/") != "" {
		return "", fmt.Errorf("control URL %q: want https://host[:port] with no user, path, query or fragment", raw)
	}
	if u.Scheme == "http" && !allowHTTP {
		return "", fmt.Errorf("control URL %q: %w: use https://host[:port] (plain HTTP only with --%s, for tests)", raw, ErrPlainHTTP, FlagInsecureHTTP)
	}
	return u.Scheme + "://" + u.Host, nil
}
