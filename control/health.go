package control

import (
	"context"
	"net/http"
	"time"
)

// Health endpoints for load balancers, unauthenticated and revealing
// nothing but the answer: GET /healthz is 200 while the process serves;
// GET /readyz is 200 when the store answers and, with several replicas,
// this one is listening for the others' changes (control/notify), else
// 503. A replica that is not ready is taken out of rotation: its long-polls
// would not hear changes committed elsewhere.
func healthz(w http.ResponseWriter, r *http.Request) {
	plain(w, http.StatusOK, "ok")
}

func readyz(ping func(context.Context) error, listening func() bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if (listening != nil && !listening()) || ping(ctx) != nil {
			plain(w, http.StatusServiceUnavailable, "not ready")
			return
		}
		plain(w, http.StatusOK, "ready")
	}
}

func plain(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}
