package convmetrics

import (
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestCostLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		m    *baagentv1.ConversationMetrics
		want string
	}{
		{&baagentv1.ConversationMetrics{}, "$0.000000"},
		{&baagentv1.ConversationMetrics{LlmCalls: 2, TotalCostUsd: 0.0042}, "$0.004200"},
		{&baagentv1.ConversationMetrics{LlmCalls: 2, TotalCostUsd: 0.00135, UnpricedCalls: 1}, "$0.001350 + unknown (1 of 2 model calls unpriced)"},
		{&baagentv1.ConversationMetrics{LlmCalls: 1, UnpricedCalls: 1}, "unknown (no price for 1 model call)"},
		{&baagentv1.ConversationMetrics{LlmCalls: 3, UnpricedCalls: 3}, "unknown (no price for 3 model calls)"},
	} {
		if got := CostLine(c.m); got != c.want {
			t.Errorf("CostLine(%v) = %q, want %q", c.m, got, c.want)
		}
	}
}

func TestReportCostByModel(t *testing.T) {
	t.Parallel()
	r := Report(&baagentv1.ConversationMetrics{LlmCalls: 3, TotalCostUsd: 0.5, CostByModel: map[string]float64{"gpt-4o-mini": 0.1, "gpt-4o": 0.4}})
	i, j := strings.Index(r, "gpt-4o: $0.400000"), strings.Index(r, "gpt-4o-mini: $0.100000")
	if !strings.Contains(r, "Cost: $0.500000\n") || i < 0 || j < i {
		t.Errorf("report:\n%s", r)
	}
	// One model: the total says it all.
	r = Report(&baagentv1.ConversationMetrics{LlmCalls: 1, TotalCostUsd: 0.5, CostByModel: map[string]float64{"gpt-4o": 0.5}})
	if strings.Contains(r, "gpt-4o:") || !strings.Contains(r, "Cost: $0.500000\n\n") {
		t.Errorf("report:\n%s", r)
	}
}
