package orchestrator

import (
	"context"
	"slices"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

func TestSkillMetaTool(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		switch n {
		case 0:
			if !slices.Contains(toolNames(req), "glob") {
				t.Errorf("before activation, tools %v", toolNames(req))
			}
			return callTools("This is a sales question.", "call_skill_1", SkillToolName, `{"name":"sales-analysis"}`), nil
		case 1:
			// sales-analysis allows sql_query file_read artifact_read.
			if got := toolNames(req); !slices.Equal(got, []string{"file_read", "sql_query", SkillToolName}) {
				t.Errorf("after activation, tools %v", got)
			}
			// The skill's messages follow the step's tool results.
			if !slices.ContainsFunc(req.Messages, func(m *baagentv1.ChatMessage) bool {
				return m.GetKind() == baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION && contains(m.GetContent(), "# Sales analysis")
			}) || req.Messages[len(req.Messages)-1].GetKind() != baagentv1.MessageKind_MESSAGE_KIND_SKILL_INSTRUCTION {
				t.Errorf("skill instructions not injected: %v", req.Messages)
			}
			res := lastToolResults(req)
			if len(res) != 1 || res[0].GetIsError() || !contains(res[0].GetContent(), `Skill "sales-analysis" activated`, "sql_query") {
				t.Errorf("skill observation %v", res)
			}
			return callTools("", "call_skill_2", SkillToolName, `{"skill":"executive-summary"}`), nil
		case 2:
			if got := toolNames(req); !slices.Equal(got, []string{"file_read", "sql_query", SkillToolName}) {
				t.Errorf("nested skill widened the tools: %v", got)
			}
			return callTools("", "call_sql", "sql_query", `{"query":"SELECT 1"}`, "call_glob", "glob", `{"pattern":"*"}`), nil
		case 3:
			res := lastToolResults(req)
			if len(res) != 2 || res[0].GetIsError() || !res[1].GetIsError() || !contains(res[1].GetContent(), codeUnknownTool) {
				t.Errorf("results under the skill's tools: %v", res)
			}
			return callTools("", "call_cycle", SkillToolName, `{"name":"sales-analysis"}`, "call_missing", SkillToolName, `{"name":"no-such-skill"}`, "call_bad", SkillToolName, `{}`), nil
		case 4:
			res := lastToolResults(req)
			if len(res) != 3 {
				t.Fatalf("results %v", res)
			}
			if !contains(res[0].GetContent(), codeSkillRefused, "Circular dependency detected: sales-analysis → executive-summary → sales-analysis") {
				t.Errorf("cycle observation:\n%s", res[0].GetContent())
			}
			if !contains(res[1].GetContent(), codeSkillNotFound, "no-such-skill") {
				t.Errorf("unknown skill observation:\n%s", res[1].GetContent())
			}
			if !contains(res[2].GetContent(), codeInvalidArguments, "missing the skill name") {
				t.Errorf("bad arguments observation:\n%s", res[2].GetContent())
			}
			return answer("Summary."), nil
		}
		return nil, context.Canceled
	}, harnessOptions{})

	run := h.start(ctx, &baagentv1.RunSpec{Input: "Summarise sales growth for management"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetComplete() == nil {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	var activated []*baagentv1.SkillActivatedPayload
	for _, e := range evs {
		if a := e.GetSkillActivated(); a != nil {
			activated = append(activated, a)
		}
	}
	if len(activated) != 2 ||
		!slices.Equal(activated[0].GetActivationChain(), []string{"sales-analysis"}) ||
		!slices.Equal(activated[1].GetActivationChain(), []string{"sales-analysis", "executive-summary"}) ||
		activated[0].GetScope() != baagentv1.SkillScope_SKILL_SCOPE_SYSTEM ||
		!slices.Equal(activated[0].GetContextModifier().GetAllowedTools().GetNames(), []string{"sql_query", "file_read", "artifact_read"}) {
		t.Errorf("skill_activated events: %v", activated)
	}
	for _, inv := range h.tools.invocations() {
		if inv.GetToolCallId() == "call_sql" {
			if inv.GetCallerId() != "skill:executive-summary" || !slices.Equal(inv.GetAllowedTools().GetNames(), []string{"file_read", "sql_query"}) {
				t.Errorf("invocation under skills: caller %q, allowed %v", inv.GetCallerId(), inv.GetAllowedTools())
			}
		}
	}
	m := evs[len(evs)-1].GetComplete().GetMetrics()
	if m.GetSkillActivations() != 2 || !slices.Equal(m.GetUniqueSkills(), []string{"sales-analysis", "executive-summary"}) {
		t.Errorf("skill metrics: %d %v", m.GetSkillActivations(), m.GetUniqueSkills())
	}
	checkPairing(t, h.ctxSvc.history(run.GetConversationId()))
}

// A skill activation and tool calls of the same step run at once: the
// calls' checkpoints read the skill stack while the activation grows it
// (a data race the load test's race detector once reported).
func TestSkillActivationBesideParallelCalls(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		if _, ok := lastToolResult(req); ok {
			return answer("done"), nil
		}
		return callTools("",
			"call_a", "noop", `{"i":1}`,
			"call_skill", SkillToolName, `{"name":"sales-analysis"}`,
			"call_b", "sql_query", `{"query":"SELECT 1"}`,
			"call_c", "glob", `{"pattern":"*"}`,
		), nil
	}, harnessOptions{})
	for range 5 {
		run := h.start(ctx, &baagentv1.RunSpec{Input: "sales"})
		evs := h.events(ctx, run.GetRunId())
		checkEnvelope(t, run, evs)
		if evs[len(evs)-1].GetComplete() == nil || indexOf(types(evs), "skill_activated") < 0 {
			t.Fatalf("events %v", types(evs))
		}
	}
}
