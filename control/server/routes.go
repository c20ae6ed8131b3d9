package server

import (
	"net/http"
)

func (s *Server) routes() {
	m := http.NewServeMux()
	users := []string{kindUser}
	people := []string{kindUser, kindOperator}
	gw := []string{kindGateway}

	m.HandleFunc("GET /v1/me", s.withAuth(s.handleMe, people...))
	m.HandleFunc("DELETE /v1/sessions/current", s.withAuth(s.handleEndSession, users...))

	m.HandleFunc("GET /v1/clusters", s.withAuth(s.handleClusters, people...))
	m.HandleFunc("GET /v1/clusters/{cid}", s.withAuth(s.handleCluster, people...))
	m.HandleFunc("GET /v1/clusters/{cid}/nodes", s.withAuth(s.handleNodes, people...))
	m.HandleFunc("GET /v1/clusters/{cid}/nodes/{nid}", s.withAuth(s.handleNode, people...))
	m.HandleFunc("PUT /v1/clusters/{cid}/nodes/{nid}/ingress", s.withAuth(s.handleNodeIngress, people...))
	m.HandleFunc("DELETE /v1/clusters/{cid}/nodes/{nid}", s.withAuth(s.handleDeleteNode, people...))
	m.HandleFunc("GET /v1/clusters/{cid}/nodes/{nid}/delete-preflight", s.withAuth(s.handleDeletePreflight, people...))

	m.HandleFunc("GET /v1/clusters/{cid}/services/wireguard", s.withAuth(s.handleServices, people...))
	m.HandleFunc("POST /v1/clusters/{cid}/services/wireguard", s.withAuth(s.handleAddService, people...))
	m.HandleFunc("GET /v1/clusters/{cid}/services/wireguard/{id}", s.withAuth(s.handleService, people...))
	m.HandleFunc("POST /v1/clusters/{cid}/services/wireguard/{id}/move-plan", s.withAuth(s.handleMovePlan, people...))
	m.HandleFunc("POST /v1/clusters/{cid}/services/wireguard/{id}/moves", s.withAuth(s.handleStartMove, people...))
	m.HandleFunc("PUT /v1/clusters/{cid}/services/wireguard/{id}/relay", s.withAuth(s.handleSetRelay, people...))
	m.HandleFunc("GET /v1/moves/{id}", s.withAuth(s.handleMove, people...))

	m.HandleFunc("POST /v1/devices", s.withAuth(s.handleRegisterDevice, users...))
	m.HandleFunc("PUT /v1/devices/{id}/clusters/{cid}", s.withAuth(s.handleJoin, users...))
	m.HandleFunc("DELETE /v1/devices/{id}/clusters/{cid}", s.withAuth(s.handleLeave, users...))
	m.HandleFunc("GET /v1/devices/{id}/map", s.withResume(s.handleDeviceMap)) // withAuth, or a stream's resume token
	m.HandleFunc("POST /v1/devices/{id}/clusters/{cid}/relay-ticket", s.withAuth(s.handleRelayTicket, users...))

	// Who is on the VPN, and how to throw them off (access.go of api).
	m.HandleFunc("GET /v1/devices", s.withAuth(s.handleDevices, people...))
	m.HandleFunc("GET /v1/devices/{id}", s.withAuth(s.handleDevice, people...))
	m.HandleFunc("POST /v1/devices/{id}/revoke", s.withAuth(s.handleRevokeDevice, people...))
	m.HandleFunc("DELETE /v1/devices/{id}", s.withAuth(s.handleDeleteDevice, people...))
	m.HandleFunc("GET /v1/me/devices", s.withAuth(s.handleMyDevices, users...))
	m.HandleFunc("DELETE /v1/me/devices/{id}", s.withAuth(s.handleRemoveMyDevice, users...))
	m.HandleFunc("GET /v1/sessions", s.withAuth(s.handleSessions, people...))
	m.HandleFunc("DELETE /v1/sessions/{id}", s.withAuth(s.handleEndUserSession, people...))
	m.HandleFunc("DELETE /v1/sessions", s.withAuth(s.handleEndUserSessions, people...))
	m.HandleFunc("POST /v1/tokens", s.withAuth(s.handleCreateToken, people...))
	m.HandleFunc("GET /v1/tokens", s.withAuth(s.handleTokens, people...))
	m.HandleFunc("DELETE /v1/tokens/{id}", s.withAuth(s.handleRevokeToken, people...))
	m.HandleFunc("GET /v1/audit", s.withAuth(s.handleAudit, people...))

	// Who may reach what (policy.go, groups.go), and who is a user (users.go).
	m.HandleFunc("GET /v1/accounts/{aid}/policy", s.withAuth(s.handlePolicy, people...))
	m.HandleFunc("PUT /v1/accounts/{aid}/policy", s.withAuth(s.handleSetPolicy, people...))
	m.HandleFunc("POST /v1/accounts/{aid}/policy/test", s.withAuth(s.handleTestPolicy, people...))
	m.HandleFunc("GET /v1/accounts/{aid}/groups", s.withAuth(s.handleGroups, people...))
	m.HandleFunc("POST /v1/accounts/{aid}/groups", s.withAuth(s.handleCreateGroup, people...))
	m.HandleFunc("POST /v1/accounts/{aid}/groups/{name}/members", s.withAuth(s.handleAddMember, people...))
	m.HandleFunc("DELETE /v1/accounts/{aid}/groups/{name}/members/{email}", s.withAuth(s.handleRemoveMember, people...))
	m.HandleFunc("GET /v1/accounts/{aid}/users", s.withAuth(s.handleUsers, people...))
	m.HandleFunc("DELETE /v1/accounts/{aid}/users/{email}", s.withAuth(s.handleRemoveUser, people...))

	m.HandleFunc("GET /v1/gateway/map", s.withAuth(s.handleGatewayMap, gw...))
	m.HandleFunc("POST /v1/gateway/report", s.withAuth(s.handleGatewayReport, gw...))
	m.HandleFunc("POST /v1/gateway/relay-check", s.withAuth(s.handleRelayCheck, gw...))

	m.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errNotFound("no route %s %s", r.Method, r.URL.Path))
	})
	s.mux = m
}
