// Package httpjson writes the JSON answers of RunOS's HTTP servers
// (control's API, its OAuth endpoints, the console's answers to its
// script): the headers every JSON answer carries, and its body as one
// JSON value and a newline. Answers hold one caller's state, so none may
// be cached.
//
// It is not for reading requests, nor for clients, nor for error bodies'
// shapes (api's ErrorBody, OAuth's error object): each server keeps
// those.
package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write answers with status and v encoded as JSON. If v cannot be encoded,
// nothing is written and the error is returned, for the caller to answer
// its own way.
func Write(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	WriteEncoded(w, status, b)
	return nil
}

// WriteEncoded answers with status and b, one JSON value already encoded.
func WriteEncoded(w http.ResponseWriter, status int, b []byte) {
	// The keys are in canonical form already, so they are assigned, not
	// canonicalized: control writes a device map 10,000 times after a move.
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
