//go:build !windows

package lab

import (
	"fmt"
	"net/http"
)

// WebAppBody is what the web app on a node answers (it stands in for
// Traefik on ports 80 of every node): tests look for it to tell which node
// served a request.
func WebAppBody(cid, nid string) string { return fmt.Sprintf("cluster=%s node=%s", cid, nid) }

// WebApp is the handler of the lab's web app on node nid of cluster cid.
func WebApp(cid, nid string) http.Handler {
	body := WebAppBody(cid, nid)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, "%s\nhello from the RunOS lab: you reached %s of cluster %s (%s %s from %s)\n",
			body, nid, cid, r.Method, r.URL.Path, r.RemoteAddr)
	})
}
