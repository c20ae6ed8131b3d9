package oauth

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
)

// maxBody bounds every form body: the largest legitimate one (the login
// form with a long state) is well under 8 KiB.
const maxBody = 16 << 10

// params are request parameters, each given at most once (RFC 6749 §3.1,
// §3.2: "parameters MUST NOT be included more than once"). An empty value
// counts as absent, as RFC 6749 §3.1 says.
type params map[string]string

// parseParams turns an encoded query or form body into params, refusing
// duplicates and anything that does not decode.
func parseParams(encoded string) (params, error) {
	vs, err := url.ParseQuery(encoded)
	if err != nil {
		return nil, errors.New("the parameters are not validly URL-encoded")
	}
	p := make(params, len(vs))
	for k, v := range vs {
		if len(v) > 1 {
			return nil, fmt.Errorf("parameter %s is given more than once", k)
		}
		if v[0] != "" {
			p[k] = v[0]
		}
	}
	return p, nil
}

// readForm reads a POST body of type application/x-www-form-urlencoded.
// Parameters in the URL's query are ignored on purpose: a form's fields
// and a token request's credentials travel in the body only.
func readForm(w http.ResponseWriter, r *http.Request) (params, error) {
	body, err := readFormRaw(w, r)
	if err != nil {
		return nil, err
	}
	return parseParams(body)
}

// readFormRaw returns the still-encoded form body, at most maxBody bytes.
func readFormRaw(w http.ResponseWriter, r *http.Request) (string, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return "", errors.New("the body must be application/x-www-form-urlencoded")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return "", errors.New("the body is too large or could not be read")
	}
	return string(body), nil
}
