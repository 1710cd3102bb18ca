package convmetrics

import (
	"fmt"
	"sort"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// CostLine renders a run's cost for people: the dollars of the priced model
// calls, and "unknown" for the part that has no price, so that a total
// never reads as complete when it is not ("$0.004200",
// "$0.001350 + unknown (1 of 2 model calls unpriced)", "unknown (no price
// for 2 model calls)").
func CostLine(m *baagentv1.ConversationMetrics) string {
	unpriced, calls := m.GetUnpricedCalls(), m.GetLlmCalls()
	switch {
	case unpriced <= 0:
		return fmt.Sprintf("$%.6f", m.GetTotalCostUsd())
	case unpriced >= calls:
		return fmt.Sprintf("unknown (no price for %d model %s)", unpriced, plural(int(unpriced), "call", "calls"))
	default:
		return fmt.Sprintf("$%.6f + unknown (%d of %d model calls unpriced)", m.GetTotalCostUsd(), unpriced, calls)
	}
}

// costByModel renders cost_by_model, one indented line per model, dearest
// first; nothing when the run used at most one priced model.
func costByModel(b *strings.Builder, m *baagentv1.ConversationMetrics) {
	by := m.GetCostByModel()
	if len(by) < 2 {
		return
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if by[names[i]] != by[names[j]] {
			return by[names[i]] > by[names[j]]
		}
		return names[i] < names[j]
	})
	for _, n := range names {
		fmt.Fprintf(b, "      %s: $%.6f\n", n, by[n])
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
