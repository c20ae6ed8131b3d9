//go:build !windows

package lab

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// WebAppBody is what the web app on a node answers (it stands in for
// Traefik on ports 80 of every node): tests look for it to tell which node
// served a request.
func WebAppBody(cid, nid string) string { return fmt.Sprintf("cluster=%s node=%s", cid, nid) }

// WebApp is the handler of the lab's web app on node nid of cluster cid.
// /bytes/N answers N bytes (at most 64 MiB) for downloads of a known size.
func WebApp(cid, nid string) http.Handler {
	body := WebAppBody(cid, nid)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, ok := strings.CutPrefix(r.URL.Path, "/bytes/"); ok {
			size, err := strconv.Atoi(n)
			if err != nil || size < 0 || size > 64<<20 {
				http.Error(w, "want /bytes/N, N up to 64 MiB", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", strconv.Itoa(size))
			chunk := []byte(strings.Repeat("runos-lab bytes ", 4096))
			for size > 0 {
				k := min(size, len(chunk))
				if _, err := w.Write(chunk[:k]); err != nil {
					return
				}
				size -= k
			}
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintf(w, "%s\nhello from the RunOS lab: you reached %s of cluster %s (%s %s from %s)\n",
			body, nid, cid, r.Method, r.URL.Path, r.RemoteAddr)
	})
}
