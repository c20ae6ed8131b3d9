package gateway

import (
	"testing"
	"time"

	"github.com/runos/vpn/gateway/policyfilter"
)

// ruleMetrics hands over the reader of refusals per rule the gateway gives.
type ruleMetrics struct {
	noMetrics
	read chan func() []policyfilter.RuleDrops
}

func (m ruleMetrics) PolicyRuleDrops(r func() []policyfilter.RuleDrops) { m.read <- r }

// TestPolicyRuleDropsWired: the gateway gives its metrics the policy
// filter's refusals per rule (counted in gateway/policyfilter).
func TestPolicyRuleDropsWired(t *testing.T) {
	m := ruleMetrics{read: make(chan func() []policyfilter.RuleDrops, 1)}
	start(t, func(c *Config) { c.Metrics = m })
	select {
	case r := <-m.read:
		if got := r(); len(got) != 0 {
			t.Errorf("refusals before any packet: %+v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway never gave its metrics the refusals per rule")
	}
}
