package oauth

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// checkRedirectURI accepts only loopback IP literal redirect URIs with a
// port: http://127.0.0.1:PORT/path or http://[::1]:PORT/path (RFC 8252
// §7.3). Any port is allowed because native apps bind a random one. The
// name "localhost" is refused (RFC 8252 §8.3: it may resolve elsewhere),
// as is anything that would parse differently in a browser than here:
// user info, fragments, backslashes, percent-encoding or spaces in the
// authority, and other spellings of the loopback addresses.
func checkRedirectURI(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("redirect_uri is missing")
	}
	if len(raw) > 2048 {
		return nil, errors.New("redirect_uri is too long")
	}
	var rest string
	switch {
	case strings.HasPrefix(raw, "http://127.0.0.1:"):
		rest = raw[len("http://127.0.0.1:"):]
	case strings.HasPrefix(raw, "http://[::1]:"):
		rest = raw[len("http://[::1]:"):]
	default:
		return nil, errors.New("redirect_uri must be http://127.0.0.1:PORT/… or http://[::1]:PORT/… (a loopback IP literal, RFC 8252)")
	}
	// The port: 1 to 5 digits, no leading zero, then the path.
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	port, err := strconv.Atoi(rest[:n])
	if n == 0 || n > 5 || rest[0] == '0' || err != nil || port < 1 || port > 65535 {
		return nil, errors.New("redirect_uri needs a port between 1 and 65535")
	}
	path := rest[n:]
	if path == "" || path[0] != '/' {
		return nil, errors.New("redirect_uri needs a path after the port, such as /callback")
	}
	for i := 0; i < len(path); i++ {
		if c := path[i]; c <= ' ' || c >= 0x7f || c == '\\' || c == '#' || c == '?' {
			return nil, errors.New("redirect_uri may not hold spaces, control characters, backslashes, a query or a fragment")
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("redirect_uri is not a valid URL")
	}
	// Belt and braces: what the parser saw must be what we checked.
	if u.Scheme != "http" || u.User != nil || u.Opaque != "" || u.Fragment != "" || u.RawQuery != "" ||
		(u.Hostname() != "127.0.0.1" && u.Hostname() != "::1") || u.Port() != rest[:n] {
		return nil, errors.New("redirect_uri is not a loopback IP literal URL")
	}
	return u, nil
}

// checkConsoleRedirect accepts the console's one redirect URI, exactly.
func checkConsoleRedirect(raw, want string) (*url.URL, error) {
	if raw != want || want == "" {
		return nil, errors.New("the RunOS console signs in only through " + want)
	}
	return url.Parse(raw)
}

// withParams returns the redirect URI with params as its query (it has
// none of its own: checkRedirectURI refuses one, so that no parameter of
// the client's can be confused with ours).
func withParams(redirect *url.URL, params url.Values) string {
	u := *redirect
	u.RawQuery = params.Encode()
	return u.String()
}

// loopbackOrigin is the redirect URI's origin for the pages'
// Content-Security-Policy form-action, which browsers also apply to the
// redirect after the form is posted. CSP host sources cannot spell an IPv6
// literal, so an [::1] redirect gets the http: scheme source instead; the
// server has already checked the redirect URI itself.
func loopbackOrigin(redirect *url.URL) string {
	if redirect.Hostname() == "127.0.0.1" {
		return "http://127.0.0.1:" + redirect.Port()
	}
	return "http:"
}
