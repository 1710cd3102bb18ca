// Package convmetrics derives and renders a run's conversation metrics
// (token use, cost, tool calls, skills, compressions): the orchestrator
// fills them in, and clients such as `baagentctl runs get` print them.
package convmetrics

import (
	"fmt"
	"sort"
	"strings"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// ToolStats is the per-tool summary of calls: call count, averages and
// rates.
func ToolStats(calls []*baagentv1.ToolMetrics) map[string]*baagentv1.ToolStats {
	type acc struct {
		n, ok      int64
		dur, tokns float64
	}
	accs := map[string]*acc{}
	for _, t := range calls {
		a := accs[t.GetToolName()]
		if a == nil {
			a = &acc{}
			accs[t.GetToolName()] = a
		}
		a.n++
		a.dur += t.GetDurationMs()
		a.tokns += float64(t.GetTotalTokens())
		if t.GetSuccess() {
			a.ok++
		}
	}
	out := make(map[string]*baagentv1.ToolStats, len(accs))
	for name, a := range accs {
		n := float64(a.n)
		out[name] = &baagentv1.ToolStats{
			CallCount:     a.n,
			AvgDurationMs: a.dur / n,
			AvgTokens:     a.tokns / n,
			SuccessRate:   float64(a.ok) / n,
			ErrorRate:     float64(a.n-a.ok) / n,
		}
	}
	return out
}

// Report renders m as a plain-text report: the
// human-readable view of a run's metrics (used by `baagentctl runs get`).
func Report(m *baagentv1.ConversationMetrics) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Conversation Metrics Report\n============================\n")
	fmt.Fprintf(&b, "Conversation ID: %s\n", m.GetConversationId())
	fmt.Fprintf(&b, "Duration: %.1fs\n\n", m.GetTotalDurationMs()/1000)
	fmt.Fprintf(&b, "Token Usage:\n  - Input: %s\n  - Output: %s\n  - Total: %s\n",
		thousands(m.GetTotalInputTokens()), thousands(m.GetTotalOutputTokens()), thousands(m.GetTotalTokens()))
	fmt.Fprintf(&b, "  - Model calls: %d\n  - Cost: %s\n", m.GetLlmCalls(), CostLine(m))
	costByModel(&b, m)
	b.WriteString("\n")
	fmt.Fprintf(&b, "Tool Calls:\n  - Total: %d\n  - Successful: %d\n  - Failed: %d\n  - Retried: %d\n\n",
		len(m.GetToolCalls()), m.GetSuccessfulCalls(), m.GetFailedCalls(), m.GetRetriedCalls())
	b.WriteString("Per-Tool Statistics:\n")
	stats := m.GetToolStats()
	if len(stats) == 0 {
		stats = ToolStats(m.GetToolCalls())
	}
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		ci, cj := stats[names[i]].GetCallCount(), stats[names[j]].GetCallCount()
		if ci != cj {
			return ci > cj
		}
		return names[i] < names[j]
	})
	if len(names) == 0 {
		b.WriteString("  None\n")
	}
	for _, n := range names {
		s := stats[n]
		fmt.Fprintf(&b, "  %s:\n    - Calls: %d\n    - Avg Duration: %.1fms\n    - Avg Tokens: %.0f\n    - Success Rate: %.1f%%\n",
			n, s.GetCallCount(), s.GetAvgDurationMs(), s.GetAvgTokens(), s.GetSuccessRate()*100)
	}
	skills := "None"
	if len(m.GetUniqueSkills()) > 0 {
		skills = strings.Join(m.GetUniqueSkills(), ", ")
	}
	fmt.Fprintf(&b, "\nSkills Activated:\n  - Total: %d\n  - Unique: %d\n  - Skills: %s\n",
		m.GetSkillActivations(), len(m.GetUniqueSkills()), skills)
	fmt.Fprintf(&b, "\nContext Management:\n  - Messages: %d\n  - Compressions: %d\n",
		m.GetMessagesCount(), m.GetCompressionEvents())
	return b.String()
}

// thousands formats n with comma separators, as Python's {:,}.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
