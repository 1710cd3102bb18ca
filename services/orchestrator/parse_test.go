package orchestrator

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baagent/baagent/core/allowlist"
	"github.com/baagent/baagent/core/convmetrics"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
)

func TestPageToken(t *testing.T) {
	id := newRunID(time.Now())
	if err := natsx.ValidateToken("run_id", id); err != nil {
		t.Fatal(err)
	}
	got, err := decodePageToken(encodePageToken(id))
	if err != nil || got != id {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	for _, bad := range []string{"", "!!", encodePageToken("run.1"), "eyJvIjoxMH0", encodePageToken("")} {
		if _, err := decodePageToken(bad); err == nil {
			t.Errorf("decodePageToken(%q) accepted", bad)
		}
	}
	a, b := newRunID(time.UnixMilli(1_000)), newRunID(time.UnixMilli(2_000))
	if a >= b {
		t.Errorf("run ids do not sort by time: %s >= %s", a, b)
	}
}

func FuzzDecodePageToken(f *testing.F) {
	f.Add(encodePageToken("run_0190aa_1"))
	f.Add("")
	f.Add("djE6")
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := decodePageToken(tok)
		if err != nil {
			return
		}
		if natsx.ValidateToken("run_id", id) != nil {
			t.Fatalf("decoded an invalid run id %q", id)
		}
		if again, err := decodePageToken(encodePageToken(id)); err != nil || again != id {
			t.Fatalf("round trip of %q: %q, %v", id, again, err)
		}
	})
}

func TestParseArgs(t *testing.T) {
	for _, ok := range []string{"", "  ", "{}", `{"a":1,"b":[true,null,"x"],"c":{"d":1.5}}`} {
		if _, err := parseArgs(ok); err != nil {
			t.Errorf("parseArgs(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"[]", "1", `"s"`, `{"a":`, "{'a':1}", "null", `{"a":1}x`} {
		if _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q) accepted", bad)
		}
	}
}

func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{"", "{}", `{"query":"SELECT 1"}`, `{"a":[1,{"b":null}]}`, "[1]", `{"a":`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		s, err := parseArgs(args)
		if err != nil {
			if strings.TrimSpace(args) == "" {
				t.Fatal("empty arguments refused")
			}
			return
		}
		// What parses is a JSON object the standard library agrees on.
		if strings.TrimSpace(args) != "" && utf8.ValidString(args) {
			var m map[string]any
			if json.Unmarshal([]byte(args), &m) != nil {
				t.Fatalf("accepted %q, which encoding/json refuses", args)
			}
		}
		_ = s.AsMap()
	})
}

func FuzzParseSkillArgs(f *testing.F) {
	for _, s := range []string{`{"name":"sales-analysis"}`, `{"skill":"x"}`, `{"name":""}`, `{}`, `[]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		name, err := parseSkillArgs(args)
		if err == nil && (name == "" || strings.TrimSpace(name) != name) {
			t.Fatalf("parseSkillArgs(%q) = %q", args, name)
		}
	})
}

func TestAllowLists(t *testing.T) {
	var st skillStack
	if !allowlist.AllowsAll(st.allowLists(nil), "anything") {
		t.Error("no lists must allow everything")
	}
	lists := st.allowLists([]string{"sql_query", "mcp__github__*"})
	for name, want := range map[string]bool{"sql_query": true, "mcp__github__search": true, "mcp__gitlab__x": false, "file_read": false} {
		if allowlist.AllowsAll(lists, name) != want {
			t.Errorf("allowlist.AllowsAll(%s) = %v", name, !want)
		}
	}
	st.push(activation{name: "a", modifier: &baagentv1.ContextModifier{AllowedTools: &baagentv1.ToolAllowList{Names: []string{"sql_query", "file_read"}}, Model: "m1"}})
	st.push(activation{name: "b", modifier: &baagentv1.ContextModifier{}})
	lists = st.allowLists([]string{"sql_query", "mcp__github__*"})
	if !allowlist.AllowsAll(lists, "sql_query") || allowlist.AllowsAll(lists, "file_read") || allowlist.AllowsAll(lists, "mcp__github__search") {
		t.Error("lists must intersect")
	}
	if st.model("def") != "m1" || st.callerID() != "skill:b" || strings.Join(st.chain(), ",") != "a,b" {
		t.Errorf("model %s caller %s chain %v", st.model("def"), st.callerID(), st.chain())
	}
	st.push(activation{name: "c", modifier: &baagentv1.ContextModifier{AllowedTools: &baagentv1.ToolAllowList{}}})
	if allowlist.AllowsAll(st.allowLists(nil), "sql_query") {
		t.Error("an empty list must allow nothing")
	}
}

func TestMetricsReport(t *testing.T) {
	c := newConvMetrics("conv-9", time.Now().Add(-1500*time.Millisecond))
	c.recordModelCall(&baagentv1.Usage{PromptTokens: 1234567, CompletionTokens: 10}, 0.5)
	c.recordToolCall(&baagentv1.ToolMetrics{ToolName: "sql_query", DurationMs: 10, TotalTokens: 30, Success: true})
	c.recordToolCall(&baagentv1.ToolMetrics{ToolName: "sql_query", DurationMs: 30, TotalTokens: 10, RetryCount: 1})
	c.recordToolCall(&baagentv1.ToolMetrics{ToolName: "glob", DurationMs: 1, Success: true})
	c.recordSkill("a")
	c.recordSkill("a")
	c.recordWindow(7, true)
	m := c.snapshot(time.Now(), true)
	s := m.GetToolStats()["sql_query"]
	if s.GetCallCount() != 2 || s.GetAvgDurationMs() != 20 || s.GetAvgTokens() != 20 || s.GetSuccessRate() != 0.5 || s.GetErrorRate() != 0.5 {
		t.Errorf("stats = %v", s)
	}
	if m.GetSuccessfulCalls() != 2 || m.GetFailedCalls() != 1 || m.GetRetriedCalls() != 1 || m.GetSkillActivations() != 2 || len(m.GetUniqueSkills()) != 1 || m.GetTotalTokens() != 1234577 || m.GetEndTime() == nil || m.GetTotalDurationMs() < 1500 {
		t.Errorf("metrics = %v", m)
	}
	r := convmetrics.Report(m)
	if !contains(r, "Input: 1,234,567", "Total: 3", "Failed: 1", "Retried: 1", "Unique: 1", "Skills: a", "Messages: 7", "Compressions: 1", "Avg Duration: 20.0ms", "Success Rate: 50.0%") ||
		strings.Index(r, "sql_query:") > strings.Index(r, "glob:") {
		t.Errorf("report:\n%s", r)
	}
}
