package httpjson

import (
	"net/http/httptest"
	"testing"
)

func TestWriteAnswersJSONNeverCached(t *testing.T) {
	w := httptest.NewRecorder()
	if err := Write(w, 201, map[string]any{"id": "d-12", "n": 3}); err != nil {
		t.Fatal(err)
	}
	if w.Code != 201 || w.Body.String() != `{"id":"d-12","n":3}`+"\n" {
		t.Errorf("%d %q", w.Code, w.Body.String())
	}
	if ct, cc := w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"); ct != "application/json" || cc != "no-store" {
		t.Errorf("Content-Type %q, Cache-Control %q", ct, cc)
	}
}

func TestWriteOfWhatCannotBeEncodedWritesNothing(t *testing.T) {
	w := httptest.NewRecorder()
	if err := Write(w, 200, map[string]any{"f": func() {}}); err == nil {
		t.Fatal("a func was encoded")
	}
	if w.Body.Len() != 0 || len(w.Header()) != 0 {
		t.Errorf("wrote %q with headers %v", w.Body.String(), w.Header())
	}
}
