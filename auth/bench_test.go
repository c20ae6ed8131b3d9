package auth

import "testing"

// BenchmarkSignInBrowser is one whole browser sign-in as the CLI runs it:
// a loopback listener, the scripted browser through the real login page
// over TLS, the redirect back, the code exchange, the listener closed.
func BenchmarkSignInBrowser(b *testing.B) {
	c := newControl(b, nil)
	for b.Loop() {
		if _, err := c.flow(newFormOpener(c, testPassword), newLines()).SignInBrowser(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
