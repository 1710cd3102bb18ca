package convmetrics

import (
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestToolStats(t *testing.T) {
	t.Parallel()
	s := ToolStats([]*baagentv1.ToolMetrics{
		{ToolName: "sql_query", DurationMs: 10, TotalTokens: 30, Success: true},
		{ToolName: "sql_query", DurationMs: 30, TotalTokens: 10},
		{ToolName: "glob", DurationMs: 1, Success: true},
	})
	q := s["sql_query"]
	if q.GetCallCount() != 2 || q.GetAvgDurationMs() != 20 || q.GetAvgTokens() != 20 || q.GetSuccessRate() != 0.5 || q.GetErrorRate() != 0.5 {
		t.Errorf("sql_query stats = %v", q)
	}
	if g := s["glob"]; g.GetCallCount() != 1 || g.GetSuccessRate() != 1 {
		t.Errorf("glob stats = %v", g)
	}
}

func TestReportDerivesStatsAndOrdersByCalls(t *testing.T) {
	t.Parallel()
	r := Report(&baagentv1.ConversationMetrics{
		ConversationId:   "conv-1",
		TotalInputTokens: 1234567,
		ToolCalls: []*baagentv1.ToolMetrics{
			{ToolName: "glob", Success: true},
			{ToolName: "sql_query", Success: true},
			{ToolName: "sql_query"},
		},
	})
	for _, want := range []string{"Conversation ID: conv-1", "Input: 1,234,567", "Total: 3", "Skills: None", "Success Rate: 50.0%"} {
		if !strings.Contains(r, want) {
			t.Errorf("report lacks %q:\n%s", want, r)
		}
	}
	if strings.Index(r, "sql_query:") > strings.Index(r, "glob:") {
		t.Errorf("the tool with more calls must come first:\n%s", r)
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234: "-1,234", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
