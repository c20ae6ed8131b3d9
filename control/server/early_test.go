package server

import (
	"bufio"
	"crypto/tls"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestUnauthenticatedRefusedBeforeItsBody: a request with no valid token
// is answered 401 at once and its connection closed, without control
// waiting for (or reading) a body that may never come.
func TestUnauthenticatedRefusedBeforeItsBody(t *testing.T) {
	e := newEnv(t)
	u, _ := url.Parse(e.ts.URL)
	for _, auth := range []string{"", "Authorization: Bearer not-a-token\r\n"} {
		c, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Headers promise 100 bytes; one comes, the rest never does.
		if _, err := c.Write([]byte("POST /v1/devices HTTP/1.1\r\nHost: control\r\n" + auth +
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")); err != nil {
			t.Fatal(err)
		}
		// Far shorter than any body timeout the test might have hit: the
		// answer must not wait for the body.
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q: no answer while the body is unfinished: %v", auth, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Fatalf("%q: %s (close %v), want 401 and the connection closed", auth, resp.Status, resp.Close)
		}
	}
}
