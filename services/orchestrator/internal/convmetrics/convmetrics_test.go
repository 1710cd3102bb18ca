package convmetrics

import (
	"strings"
	"testing"
	"time"

	report "github.com/baagent/baagent/core/convmetrics"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestMetricsReport(t *testing.T) {
	t.Parallel()
	c := New("conv-9", time.Now().Add(-1500*time.Millisecond))
	c.RecordModelCall("m", &baagentv1.Usage{PromptTokens: 1234567, CompletionTokens: 10}, 0.5, true)
	c.RecordToolCall(&baagentv1.ToolMetrics{ToolName: "sql_query", DurationMs: 10, TotalTokens: 30, Success: true})
	c.RecordToolCall(&baagentv1.ToolMetrics{ToolName: "sql_query", DurationMs: 30, TotalTokens: 10, RetryCount: 1})
	c.RecordToolCall(&baagentv1.ToolMetrics{ToolName: "glob", DurationMs: 1, Success: true})
	c.RecordSkill("a")
	c.RecordSkill("a")
	c.RecordWindow(7, true)
	m := c.Snapshot(time.Now(), true)
	s := m.GetToolStats()["sql_query"]
	if s.GetCallCount() != 2 || s.GetAvgDurationMs() != 20 || s.GetAvgTokens() != 20 || s.GetSuccessRate() != 0.5 || s.GetErrorRate() != 0.5 {
		t.Errorf("stats = %v", s)
	}
	if m.GetSuccessfulCalls() != 2 || m.GetFailedCalls() != 1 || m.GetRetriedCalls() != 1 || m.GetSkillActivations() != 2 || len(m.GetUniqueSkills()) != 1 || m.GetTotalTokens() != 1234577 || m.GetEndTime() == nil || m.GetTotalDurationMs() < 1500 {
		t.Errorf("metrics = %v", m)
	}
	r := report.Report(m)
	if !contains(r, "Input: 1,234,567", "Total: 3", "Failed: 1", "Retried: 1", "Unique: 1", "Skills: a", "Messages: 7", "Compressions: 1", "Avg Duration: 20.0ms", "Success Rate: 50.0%") ||
		strings.Index(r, "sql_query:") > strings.Index(r, "glob:") {
		t.Errorf("report:\n%s", r)
	}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestCostByModel(t *testing.T) {
	t.Parallel()
	c := New("conv-1", time.Now())
	u := &baagentv1.Usage{PromptTokens: 10, CompletionTokens: 1}
	c.RecordModelCall("a", u, 0.25, true)
	c.RecordModelCall("a", u, 0.25, true)
	c.RecordModelCall("b", u, 1, true)
	c.RecordModelCall("c", u, 0, false) // unpriced: counted, not costed
	m := c.Snapshot(time.Now(), false)
	if m.GetLlmCalls() != 4 || m.GetUnpricedCalls() != 1 || m.GetTotalCostUsd() != 1.5 || m.GetTotalInputTokens() != 40 ||
		len(m.GetCostByModel()) != 2 || m.GetCostByModel()["a"] != 0.5 || m.GetCostByModel()["b"] != 1 {
		t.Fatalf("metrics = %v", m)
	}
	// Beyond MaxCostModels models, the cost goes to "other".
	for i := range MaxCostModels + 5 {
		c.RecordModelCall(strings.Repeat("m", i+1), u, 1, true)
	}
	m = c.Snapshot(time.Now(), false)
	if n := len(m.GetCostByModel()); n != MaxCostModels+1 || m.GetCostByModel()[OtherModel] != 7 {
		t.Errorf("%d models, other %v", n, m.GetCostByModel()[OtherModel])
	}
}
