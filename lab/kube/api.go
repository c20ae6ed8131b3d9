package kube

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Version is what the API stand-in says it is.
const Version = "v1.32.0-runos-lab"

// API is the Kubernetes API stand-in of w: GET /version, discovery (/api,
// /api/v1, /apis) and pod lists (/api/v1/pods,
// /api/v1/namespaces/{ns}/pods). It takes any bearer token: it stands in
// for what the VPN reaches, not for Kubernetes' authentication.
func API(w World, started time.Time) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, map[string]string{"major": "1", "minor": "32", "gitVersion": Version, "platform": "linux/amd64",
			"goVersion": "go1.26", "compiler": "gc", "buildDate": started.UTC().Format(time.RFC3339)})
	})
	mux.HandleFunc("GET /api", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, map[string]any{"kind": "APIVersions", "versions": []string{"v1"},
			"serverAddressByClientCIDRs": []map[string]string{{"clientCIDR": "0.0.0.0/0", "serverAddress": "k8s:6443"}}})
	})
	mux.HandleFunc("GET /apis", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []any{}})
	})
	mux.HandleFunc("GET /api/v1", func(rw http.ResponseWriter, _ *http.Request) {
		writeJSON(rw, map[string]any{"kind": "APIResourceList", "groupVersion": "v1", "resources": []map[string]any{
			{"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod", "verbs": []string{"get", "list"}, "shortNames": []string{"po"}},
			{"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace", "verbs": []string{"get", "list"}, "shortNames": []string{"ns"}},
		}})
	})
	mux.HandleFunc("GET /api/v1/pods", func(rw http.ResponseWriter, r *http.Request) { writePods(rw, w, "", started) })
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods", func(rw http.ResponseWriter, r *http.Request) {
		writePods(rw, w, r.PathValue("ns"), started)
	})
	return mux
}

func writePods(rw http.ResponseWriter, w World, ns string, started time.Time) {
	items := []any{}
	for _, p := range w.Pods {
		if ns != "" && p.Namespace != ns {
			continue
		}
		items = append(items, map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace, "uid": w.Cluster + "-" + p.Name,
				"creationTimestamp": started.UTC().Format(time.RFC3339), "labels": map[string]string{"runos.io/cluster": w.Cluster}},
			"spec": map[string]any{"nodeName": p.Node, "containers": []map[string]string{{"name": "app", "image": "runos-lab"}}},
			"status": map[string]any{"phase": "Running", "podIP": p.IP.String(),
				"containerStatuses": []map[string]any{{"name": "app", "ready": true, "restartCount": 0, "image": "runos-lab", "imageID": "", "state": map[string]any{"running": map[string]string{"startedAt": started.UTC().Format(time.RFC3339)}}}},
				"conditions":        []map[string]string{{"type": "Ready", "status": "True"}}},
		})
	}
	writeJSON(rw, map[string]any{"apiVersion": "v1", "kind": "PodList", "metadata": map[string]string{"resourceVersion": "1"}, "items": items})
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(v)
}

// PodNames lists the pods' names (for logs).
func PodNames(w World) string {
	var n []string
	for _, p := range w.Pods {
		n = append(n, p.Namespace+"/"+p.Name)
	}
	return strings.Join(n, ", ")
}
