package kube

import "fmt"

// Kubeconfig is a kubeconfig for the cluster named cid whose API is at
// server (https://k8s.<cid>.<aid>.<root>:6443), trusting the CA in caFile,
// as a cluster's usual kubeconfig: kubectl uses it as it is.
func Kubeconfig(cid, server, caFile string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority: %[3]s
users:
- name: %[1]s-admin
  user:
    token: runos-lab
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[1]s-admin
    namespace: default
current-context: %[1]s
`, cid, server, caFile)
}
