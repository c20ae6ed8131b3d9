package reqid

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHandler(t *testing.T) {
	var seen []string
	h := Handler(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = append(seen, From(r.Context())) })))
	for range 2 {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set(Header, "chosen-by-the-client")
		h.ServeHTTP(rec, req)
		if got := rec.Header().Values(Header); len(got) != 1 || got[0] != seen[len(seen)-1] || len(got[0]) != 16 {
			t.Fatalf("answer's ids %q, handler saw %q", got, seen)
		}
	}
	if seen[0] == seen[1] || seen[0] == "chosen-by-the-client" {
		t.Fatalf("ids %q: want a fresh one per request, never the client's", seen)
	}
}
