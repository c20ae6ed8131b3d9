package vpnd

import (
	"net/http"
	"testing"

	"github.com/runos/vpn/api"
)

// A network change makes the next ticket dial control afresh: the client
// kept from before talked over the network that is gone (TestPrivateIngressAway
// saw a ticket wait 10 s on it, and the relay with it, after a laptop came
// back to its LAN).
func TestRelayTicketsForgetTheClientOnANetworkChange(t *testing.T) {
	made := 0
	r := &relayTickets{connect: func(apiURL, token string) (*api.Client, error) {
		made++
		return &api.Client{BaseURL: apiURL, Token: token, HTTP: &http.Client{}}, nil
	}}
	r.set(relayCreds{apiURL: "https://control.example", token: "t", deviceID: "d-1"})
	first, _, err := r.clientFor()
	if err != nil {
		t.Fatal(err)
	}
	if again, _, _ := r.clientFor(); again != first || made != 1 {
		t.Fatalf("the client was made again without a change (%d made)", made)
	}
	r.networkChanged()
	next, _, err := r.clientFor()
	if err != nil {
		t.Fatal(err)
	}
	if next == first || made != 2 {
		t.Fatalf("after a network change the old client was kept (%d made)", made)
	}
	r.networkChanged() // with no client: nothing to close
	r.set(relayCreds{})
	if _, _, err := r.clientFor(); err == nil {
		t.Fatal("signed out: a client was made")
	}
}
