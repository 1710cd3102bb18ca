package orchestrator

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// convMetrics accumulates the ConversationMetrics of one run (a
// metrics collector scoped to a run: a run record carries its own
// metrics, so there is no process-wide map to bound). Safe for concurrent
// use by parallel tool calls.
type convMetrics struct {
	mu sync.Mutex
	m  *baagentv1.ConversationMetrics
}

func newConvMetrics(conversationID string, start time.Time) *convMetrics {
	return &convMetrics{m: &baagentv1.ConversationMetrics{
		ConversationId: conversationID,
		StartTime:      timestamppb.New(start),
	}}
}

// recordModelCall adds one model call's usage and cost.
func (c *convMetrics) recordModelCall(u *baagentv1.Usage, costUSD float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.LlmCalls++
	c.m.TotalInputTokens += u.GetPromptTokens()
	c.m.TotalOutputTokens += u.GetCompletionTokens()
	c.m.TotalTokens = c.m.TotalInputTokens + c.m.TotalOutputTokens
	c.m.TotalCostUsd += costUSD
}

// recordToolCall adds one tool call to the run's metrics.
func (c *convMetrics) recordToolCall(t *baagentv1.ToolMetrics) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.ToolCalls = append(c.m.ToolCalls, t)
	if t.GetSuccess() {
		c.m.SuccessfulCalls++
	} else {
		c.m.FailedCalls++
	}
	if t.GetRetryCount() > 0 {
		c.m.RetriedCalls++
	}
}

// recordSkill counts an activation of name.
func (c *convMetrics) recordSkill(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.SkillActivations++
	if !slices.Contains(c.m.UniqueSkills, name) {
		c.m.UniqueSkills = append(c.m.UniqueSkills, name)
	}
}

// recordWindow notes the message count of the latest window and whether it
// was compressed.
func (c *convMetrics) recordWindow(messages int, compressed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.MessagesCount = int32(messages)
	if compressed {
		c.m.CompressionEvents++
	}
}

// snapshot returns a copy with end time and duration as of now (the run's
// end, once it has ended).
func (c *convMetrics) snapshot(now time.Time, ended bool) *baagentv1.ConversationMetrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := proto.Clone(c.m).(*baagentv1.ConversationMetrics)
	out.ToolStats = toolStats(out.ToolCalls)
	out.TotalDurationMs = float64(now.Sub(c.m.GetStartTime().AsTime()).Microseconds()) / 1000
	if ended {
		out.EndTime = timestamppb.New(now)
	}
	return out
}

// toolStats is the per-tool view: call count, averages and
// rates.
func toolStats(calls []*baagentv1.ToolMetrics) map[string]*baagentv1.ToolStats {
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

// MetricsReport renders m as a report: the
// human-readable view of a run's metrics (used by `baagentctl runs get`).
func MetricsReport(m *baagentv1.ConversationMetrics) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Conversation Metrics Report\n============================\n")
	fmt.Fprintf(&b, "Conversation ID: %s\n", m.GetConversationId())
	fmt.Fprintf(&b, "Duration: %.1fs\n\n", m.GetTotalDurationMs()/1000)
	fmt.Fprintf(&b, "Token Usage:\n  - Input: %s\n  - Output: %s\n  - Total: %s\n",
		thousands(m.GetTotalInputTokens()), thousands(m.GetTotalOutputTokens()), thousands(m.GetTotalTokens()))
	fmt.Fprintf(&b, "  - Model calls: %d\n  - Cost: $%.6f\n\n", m.GetLlmCalls(), m.GetTotalCostUsd())
	fmt.Fprintf(&b, "Tool Calls:\n  - Total: %d\n  - Successful: %d\n  - Failed: %d\n  - Retried: %d\n\n",
		len(m.GetToolCalls()), m.GetSuccessfulCalls(), m.GetFailedCalls(), m.GetRetriedCalls())
	b.WriteString("Per-Tool Statistics:\n")
	stats := m.GetToolStats()
	if len(stats) == 0 {
		stats = toolStats(m.GetToolCalls())
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
