package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestWatchShowsResumeToken: a client made by NewClient shows, when it
// reconnects a stream, the resume token control gave it on the last one;
// a copy with another token shows none.
func TestWatchShowsResumeToken(t *testing.T) {
	var mu sync.Mutex
	var shown []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		shown = append(shown, r.Header.Get(HeaderResume))
		n := len(shown)
		mu.Unlock()
		w.Header().Set("Content-Type", StreamContentType)
		w.Header().Set(HeaderResume, fmt.Sprintf("rs1.token-%d", n))
		w.Write(AppendEvent(nil, EventDeviceMap, uint64(n), []byte(fmt.Sprintf(`{"version":%d}`, n))))
		// Ends the stream: the client reconnects.
	}))
	defer ts.Close()
	c, err := NewClient(ts.URL, "tok", "", AllowHTTP(true))
	if err != nil {
		t.Fatal(err)
	}
	each := func(*DeviceMap) error { return nil }
	for range 2 {
		_ = c.WatchDeviceMap(context.Background(), "d1", 0, each)
	}
	_ = c.WithToken("another").WatchDeviceMap(context.Background(), "d1", 0, each)
	mu.Lock()
	defer mu.Unlock()
	want := []string{"", "rs1.token-1", ""}
	if fmt.Sprint(shown) != fmt.Sprint(want) {
		t.Fatalf("resume tokens shown %q, want %q", shown, want)
	}
}
