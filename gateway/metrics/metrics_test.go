package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/runos/vpn/gateway/policyfilter"
)

func TestGatewayMetrics(t *testing.T) {
	now := time.Unix(1000, 0)
	g := New(func() time.Time { return now })
	if err := testutil.GatherAndCompare(g.Registry(), strings.NewReader(`
# HELP runos_gateway_control_last_answer_age_seconds Seconds since control last answered (a map or a report); -1 before its first answer.
# TYPE runos_gateway_control_last_answer_age_seconds gauge
runos_gateway_control_last_answer_age_seconds -1
`), "runos_gateway_control_last_answer_age_seconds"); err != nil {
		t.Error(err)
	}
	g.Serving("active", 2)
	g.Handshakes(2)
	g.Handshakes(1)
	g.Traffic(100, 40)
	g.Traffic(50, 0)
	g.ControlAnswered(now.Add(-3 * time.Second))
	g.PolicyDropped()
	g.PolicyDropped()
	want := `
# HELP runos_gateway_control_last_answer_age_seconds Seconds since control last answered (a map or a report); -1 before its first answer.
# TYPE runos_gateway_control_last_answer_age_seconds gauge
runos_gateway_control_last_answer_age_seconds 3
# HELP runos_gateway_handshakes_total New handshakes seen on the WireGuard server (read every heartbeat, and every 20 ms while devices are switching).
# TYPE runos_gateway_handshakes_total counter
runos_gateway_handshakes_total 3
# HELP runos_gateway_peers Devices configured as peers of this node's WireGuard server (0 when not serving).
# TYPE runos_gateway_peers gauge
runos_gateway_peers 2
# HELP runos_gateway_policy_dropped_packets_total Packets from devices dropped because the account's access policy does not let their user reach the destination.
# TYPE runos_gateway_policy_dropped_packets_total counter
runos_gateway_policy_dropped_packets_total 2
# HELP runos_gateway_received_bytes_total Bytes received from devices through the tunnel.
# TYPE runos_gateway_received_bytes_total counter
runos_gateway_received_bytes_total 150
# HELP runos_gateway_role 1 for the role this node serves for its cluster's VPN (active, standby, draining, none).
# TYPE runos_gateway_role gauge
runos_gateway_role{role="active"} 1
runos_gateway_role{role="draining"} 0
runos_gateway_role{role="none"} 0
runos_gateway_role{role="standby"} 0
# HELP runos_gateway_transmitted_bytes_total Bytes sent to devices through the tunnel.
# TYPE runos_gateway_transmitted_bytes_total counter
runos_gateway_transmitted_bytes_total 40
`
	if err := testutil.GatherAndCompare(g.Registry(), strings.NewReader(want), "runos_gateway_control_last_answer_age_seconds",
		"runos_gateway_handshakes_total", "runos_gateway_peers", "runos_gateway_policy_dropped_packets_total", "runos_gateway_received_bytes_total", "runos_gateway_role",
		"runos_gateway_transmitted_bytes_total"); err != nil {
		t.Error(err)
	}
}

func TestReachDropped(t *testing.T) {
	g := New(time.Now)
	if n, err := testutil.GatherAndCount(g.Registry(), "runos_gateway_reach_dropped_packets_total"); err != nil || n != 0 {
		t.Fatalf("before forwarding: %d series, %v", n, err)
	}
	g.ReachDropped(func() map[string]uint64 { return map[string]uint64{"node": 2, "undeclared": 5} })
	want := `
# HELP runos_gateway_reach_dropped_packets_total Packets devices sent through this node that were dropped: to another device, to the node's other addresses, neither TCP nor UDP into the cluster, or outside the cluster's declared prefixes.
# TYPE runos_gateway_reach_dropped_packets_total counter
runos_gateway_reach_dropped_packets_total{reason="node"} 2
runos_gateway_reach_dropped_packets_total{reason="undeclared"} 5
`
	if err := testutil.GatherAndCompare(g.Registry(), strings.NewReader(want), "runos_gateway_reach_dropped_packets_total"); err != nil {
		t.Fatal(err)
	}
}

func TestPolicyDroppedByRule(t *testing.T) {
	g := New(time.Now)
	if n, err := testutil.GatherAndCount(g.Registry(), "runos_gateway_policy_dropped_packets_by_rule_total"); err != nil || n != 0 {
		t.Fatalf("before a filter: %d series, %v", n, err)
	}
	g.PolicyRuleDrops(func() []policyfilter.RuleDrops {
		return []policyfilter.RuleDrops{{Line: 0, Rule: policyfilter.DefaultDeny, Packets: 7}, {Line: 4, Rule: "allow user:bob@x -> ky3: 10.96.0.20:5432", Packets: 2}}
	})
	want := `
# HELP runos_gateway_policy_dropped_packets_by_rule_total Packets from devices the access policy refused, by the rule they were counted against: the first of the user's rules reaching the destination's address but not its port or protocol (line and rule as in the policy document), or rule="default deny" (line 0) when no rule reaches it. Only rules that refused a packet are listed.
# TYPE runos_gateway_policy_dropped_packets_by_rule_total counter
runos_gateway_policy_dropped_packets_by_rule_total{line="0",rule="default deny"} 7
runos_gateway_policy_dropped_packets_by_rule_total{line="4",rule="allow user:bob@x -> ky3: 10.96.0.20:5432"} 2
`
	if err := testutil.GatherAndCompare(g.Registry(), strings.NewReader(want), "runos_gateway_policy_dropped_packets_by_rule_total"); err != nil {
		t.Fatal(err)
	}
}
