package orchestrator

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baagent/baagent/core/convmetrics"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/testkit"
)

// checkPairing asserts that every assistant tool call in the stored history
// is answered, right after it, by tool messages carrying the model's ids.
func checkPairing(t *testing.T, hist []*baagentv1.ChatMessage) {
	t.Helper()
	for i, m := range hist {
		if m.GetRole() != baagentv1.Role_ROLE_ASSISTANT || len(m.GetToolCalls()) == 0 {
			continue
		}
		for j, c := range m.GetToolCalls() {
			k := i + 1 + j
			if k >= len(hist) || hist[k].GetRole() != baagentv1.Role_ROLE_TOOL || hist[k].GetToolCallId() != c.GetId() || hist[k].GetToolName() != c.GetName() {
				t.Fatalf("tool call %s (%s) at %d is not answered at %d by its tool message", c.GetId(), c.GetName(), i, k)
			}
		}
	}
}

func TestRunAnswersWithToolCall(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		switch n {
		case 0:
			return callTools("I need revenue by category.", "call_sql_1", "sql_query", `{"query":"SELECT category, SUM(revenue) FROM sales GROUP BY 1"}`), nil
		default:
			res := lastToolResults(req)
			if len(res) != 1 || res[0].GetToolCallId() != "call_sql_1" {
				t.Errorf("model did not see the tool result: %v", res)
			}
			return answer("Electronics had the highest revenue (125,000)."), nil
		}
		// The question matches the sales-analysis skill's trigger
		// "revenue"; this test is about the loop, not triggers.
	}, harnessOptions{mutate: func(o *Options) { o.SkillTriggers = SkillTriggersOff }})

	run := h.start(ctx, &baagentv1.RunSpec{Input: "Which product category had the highest revenue last quarter?", ConversationId: "conv-1", Model: "priced-model"})
	if run.GetState() != baagentv1.RunState_RUN_STATE_QUEUED || !strings.HasPrefix(run.GetRunId(), "run_") || run.GetMaxSteps() != DefaultMaxSteps || run.GetModel() != "priced-model" || !run.GetScriptedModel() {
		t.Fatalf("StartRun returned %v", run)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	want := []string{"start", "step_start", "text_delta", "text_delta", "cost_update", "thought", "act", "observe", "step_end",
		"step_start", "text_delta", "text_delta", "cost_update", "step_end", "complete"}
	if !slices.Equal(types(evs), want) {
		t.Fatalf("events\n got %v\nwant %v", types(evs), want)
	}
	if s := evs[0].GetStart(); !s.GetScriptedModel() || s.GetReplica() != "test-replica" || s.GetMaxSteps() != 50 || s.GetModel() != "priced-model" {
		t.Errorf("start = %v", s)
	}
	act, obs := evs[6].GetAct(), evs[7].GetObserve()
	if act.GetToolCallId() != "call_sql_1" || act.GetToolName() != "sql_query" || act.GetToolInput().GetFields()["query"].GetStringValue() == "" {
		t.Errorf("act = %v", act)
	}
	if obs.GetToolCallId() != "call_sql_1" || !obs.GetSuccess() || obs.GetDurationMs() != 1.5 || obs.GetOutputLevel() != baagentv1.OutputLevel_OUTPUT_LEVEL_STANDARD || !strings.Contains(obs.GetObservation(), "Electronics") {
		t.Errorf("observe = %v", obs)
	}
	if evs[6].GetStep() != 1 || evs[10].GetStep() != 2 {
		t.Errorf("steps of act and second text_delta = %d, %d", evs[6].GetStep(), evs[10].GetStep())
	}
	cu := evs[4].GetCostUpdate()
	// 100 prompt tokens at $2.5/M + 20 completion tokens at $10/M.
	if cu.GetModel() != "priced-model" || cu.GetUsage().GetPromptTokens() != 100 || cu.GetTotalInputTokens() != 100 || math.Abs(cu.GetStepCostUsd()-0.00045) > 1e-12 || !cu.GetPriceKnown() {
		t.Errorf("cost_update = %v", cu)
	}
	complete := evs[len(evs)-1].GetComplete()
	if complete.GetContent() != "Electronics had the highest revenue (125,000)." || complete.GetFormat() != "markdown" {
		t.Errorf("complete = %v", complete)
	}
	m := complete.GetMetrics()
	if m.GetLlmCalls() != 2 || math.Abs(m.GetTotalCostUsd()-0.0009) > 1e-12 || math.Abs(m.GetCostByModel()["priced-model"]-0.0009) > 1e-12 || m.GetUnpricedCalls() != 0 || m.GetTotalInputTokens() != 200 || m.GetTotalOutputTokens() != 40 || m.GetTotalTokens() != 240 ||
		len(m.GetToolCalls()) != 1 || m.GetSuccessfulCalls() != 1 || m.GetToolStats()["sql_query"].GetCallCount() != 1 ||
		m.GetToolCalls()[0].GetInputTokens() == 0 || m.GetEndTime() == nil || m.GetConversationId() != "conv-1" {
		t.Errorf("metrics = %v", m)
	}

	// The invocation carried the model's id and the run's context.
	inv := h.tools.invocations()
	if len(inv) != 1 || inv[0].GetToolCallId() != "call_sql_1" || inv[0].GetRunId() != run.GetRunId() || inv[0].GetTenant() != testTenant ||
		inv[0].GetConversationId() != "conv-1" || inv[0].GetContextUsage() != 0.1 || inv[0].GetCallerId() != "agent" || inv[0].GetAllowedTools() != nil {
		t.Errorf("invocations = %v", inv)
	}
	// The model was offered the tools and the skill meta-tool, with the catalog in the system prompt.
	req := h.model.requests()[0]
	if names := toolNames(req); !slices.Contains(names, "sql_query") || !slices.Contains(names, SkillToolName) {
		t.Errorf("tools offered: %v", names)
	}
	if req.Messages[0].GetRole() != baagentv1.Role_ROLE_SYSTEM || req.Messages[1].GetKind() != baagentv1.MessageKind_MESSAGE_KIND_SKILL_CATALOG || !strings.Contains(req.Messages[1].GetContent(), "sales-analysis") {
		t.Errorf("system messages: %v / %v", req.Messages[0], req.Messages[1])
	}

	hist := h.ctxSvc.history("conv-1")
	roles := []baagentv1.Role{baagentv1.Role_ROLE_USER, baagentv1.Role_ROLE_ASSISTANT, baagentv1.Role_ROLE_TOOL, baagentv1.Role_ROLE_ASSISTANT}
	if len(hist) != len(roles) {
		t.Fatalf("history has %d messages: %v", len(hist), hist)
	}
	for i, m := range hist {
		if m.GetRole() != roles[i] || m.GetRoundId() != run.GetRunId() || m.GetId() == "" {
			t.Errorf("history[%d] = %v", i, m)
		}
	}
	checkPairing(t, hist)

	final := h.waitRun(ctx, run.GetRunId())
	if final.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED || final.GetFinalAnswer() != complete.GetContent() || final.GetStep() != 2 ||
		final.GetLastSeq() != uint64(len(evs)) || final.GetFinishedAt() == nil || final.GetStartedAt() == nil || final.GetMetrics().GetLlmCalls() != 2 {
		t.Errorf("final record = %v", final)
	}
	// Counted just after the final record is stored.
	testkit.Eventually(t, 5*time.Second, "runs_total{completed} = 1", func() bool {
		return testutil.ToFloat64(h.srv.metrics.runs.WithLabelValues("completed")) == 1
	})
	if got := testutil.ToFloat64(h.srv.metrics.toolCalls.WithLabelValues(toolOK)); got != 1 {
		t.Errorf("tool_calls_total{success} = %v", got)
	}
	if got := testutil.ToFloat64(h.srv.metrics.steps); got != 2 {
		t.Errorf("steps_total = %v", got)
	}
	if n, err := testutil.GatherAndCount(h.reg); err != nil || n == 0 {
		t.Errorf("registry: %d metrics, %v", n, err)
	}
	report := convmetrics.Report(final.GetMetrics())
	if !contains(report, "Conversation Metrics Report", "Conversation ID: conv-1", "sql_query:", "Success Rate: 100.0%", "Input: 200") {
		t.Errorf("report:\n%s", report)
	}
}

func TestParallelToolCallsAndErrorObservations(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		if n == 0 {
			return callTools("",
				"call_a", "noop", `{"x":1}`,
				"call_b", "sql_query", `{"query": "SELECT 1"`, // malformed JSON
				"call_c", "no_such_tool", `{}`,
				"call_d", "always_fails", ``,
			), nil
		}
		res := lastToolResults(req)
		if len(res) != 4 {
			t.Errorf("model saw %d tool results", len(res))
			return answer("?"), nil
		}
		for i, id := range []string{"call_a", "call_b", "call_c", "call_d"} {
			if res[i].GetToolCallId() != id {
				t.Errorf("result %d answers %s, want %s", i, res[i].GetToolCallId(), id)
			}
		}
		if res[0].GetIsError() || !res[1].GetIsError() || !res[2].GetIsError() || !res[3].GetIsError() {
			t.Errorf("is_error flags: %v", res)
		}
		if !contains(res[1].GetContent(), "Operation failed.", "Error Type: invalid_parameters", "Error Code: "+codeInvalidJSON, "Tool Call ID: call_b") {
			t.Errorf("malformed JSON observation:\n%s", res[1].GetContent())
		}
		if !contains(res[2].GetContent(), "Error Type: not_found", codeUnknownTool, "no_such_tool", "Available tools: ", "sql_query") {
			t.Errorf("unknown tool observation:\n%s", res[2].GetContent())
		}
		if !contains(res[3].GetContent(), "Error Type: execution_error", "BOOM") {
			t.Errorf("tool failure observation:\n%s", res[3].GetContent())
		}
		return answer("Recovered."), nil
	}, harnessOptions{})

	run := h.start(ctx, &baagentv1.RunSpec{Input: "try everything"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetComplete().GetContent() != "Recovered." {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	var acts, observes []string
	for _, e := range evs {
		if a := e.GetAct(); a != nil {
			acts = append(acts, a.GetToolCallId())
			if a.GetToolCallId() == "call_b" && (a.GetToolInput() != nil || a.GetRawArguments() != `{"query": "SELECT 1"`) {
				t.Errorf("act for malformed args = %v", a)
			}
		}
		if o := e.GetObserve(); o != nil {
			observes = append(observes, o.GetToolCallId())
		}
	}
	if !slices.Equal(acts, []string{"call_a", "call_b", "call_c", "call_d"}) {
		t.Errorf("acts %v", acts)
	}
	slices.Sort(observes)
	if !slices.Equal(observes, acts) {
		t.Errorf("observes %v", observes)
	}
	// Only the well-formed calls of known tools reached the toolrunner.
	var invoked []string
	for _, r := range h.tools.invocations() {
		invoked = append(invoked, r.GetToolCallId())
	}
	slices.Sort(invoked)
	if !slices.Equal(invoked, []string{"call_a", "call_d"}) {
		t.Errorf("invoked %v", invoked)
	}
	checkPairing(t, h.ctxSvc.history(run.GetConversationId()))
	m := evs[len(evs)-1].GetComplete().GetMetrics()
	if m.GetSuccessfulCalls() != 1 || m.GetFailedCalls() != 3 {
		t.Errorf("metrics: %d ok, %d failed", m.GetSuccessfulCalls(), m.GetFailedCalls())
	}
	for outcome, want := range map[string]float64{toolOK: 1, toolFailed: 1, toolInvalidArgs: 1, toolUnknown: 1} {
		if got := testutil.ToFloat64(h.srv.metrics.toolCalls.WithLabelValues(outcome)); got != want {
			t.Errorf("tool_calls_total{%s} = %v, want %v", outcome, got, want)
		}
	}
}

func TestUnimplementedPeersEndRunWithClearError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ho      func(*fakeToolRunner) harnessOptions
		service string
		rpc     string
	}{
		{"context", func(*fakeToolRunner) harnessOptions {
			return harnessOptions{context: &baagentv1.UnimplementedContextServiceServer{}}
		}, "context", "Append"},
		{"toolrunner ListTools", func(*fakeToolRunner) harnessOptions {
			return harnessOptions{toolrunner: &baagentv1.UnimplementedToolRunnerServiceServer{}}
		}, "toolrunner", "ListTools"},
		{"toolrunner Invoke", func(f *fakeToolRunner) harnessOptions {
			f.unimplementedInvoke = true
			return harnessOptions{}
		}, "toolrunner", "Invoke"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			tr := newFakeToolRunner()
			ho := tc.ho(tr)
			if ho.toolrunner == nil {
				ho.toolrunner = tr
			}
			h := newHarness(t, func(context.Context, int, ModelRequest) (*ModelResponse, error) {
				return callTools("", "call_1", "noop", `{}`), nil
			}, ho)
			run := h.start(ctx, &baagentv1.RunSpec{Input: "hello"})
			evs := h.events(ctx, run.GetRunId())
			checkEnvelope(t, run, evs)
			e := evs[len(evs)-1].GetError()
			if e.GetCode() != CodePeerUnimplemented || !contains(e.GetMessage(), "the "+tc.service+" service does not implement "+tc.rpc) {
				t.Fatalf("error = %v (events %v)", e, types(evs))
			}
			final := h.waitRun(ctx, run.GetRunId())
			if final.GetState() != baagentv1.RunState_RUN_STATE_FAILED || final.GetError().GetCode() != CodePeerUnimplemented {
				t.Errorf("record = %v", final)
			}
		})
	}
}

func TestMaxSteps(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, _ ModelRequest) (*ModelResponse, error) {
		// Different arguments each time: a loop the doom-loop detector
		// does not catch, only the step limit.
		return callTools("again", "call_"+string(rune('a'+n)), "noop", fmt.Sprintf(`{"n": %d}`, n)), nil
	}, harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "loop forever", MaxSteps: 3})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	steps := 0
	for _, e := range evs {
		if e.GetStepStart() != nil {
			steps++
		}
	}
	last := evs[len(evs)-1]
	if steps != 3 || last.GetError().GetCode() != CodeMaxSteps || !strings.Contains(last.GetError().GetMessage(), "3 steps") {
		t.Fatalf("%d steps, last %v", steps, last)
	}
	if len(h.model.requests()) != 3 {
		t.Errorf("model called %d times", len(h.model.requests()))
	}
}

func TestModelErrorAndProtocolErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp *ModelResponse
		err  error
		code string
	}{
		{"endpoint down", nil, context.DeadlineExceeded, CodeModelUnavailable},
		{"empty answer", answer("  "), nil, CodeModelProtocol},
		{"tool call without id", callTools("", "", "noop", "{}"), nil, CodeModelProtocol},
		{"duplicate ids", callTools("", "c1", "noop", "{}", "c1", "noop", "{}"), nil, CodeModelProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			h := newHarness(t, func(context.Context, int, ModelRequest) (*ModelResponse, error) { return tc.resp, tc.err }, harnessOptions{})
			run := h.start(ctx, &baagentv1.RunSpec{Input: "x"})
			evs := h.events(ctx, run.GetRunId())
			checkEnvelope(t, run, evs)
			if got := evs[len(evs)-1].GetError().GetCode(); got != tc.code {
				t.Fatalf("code %q, want %q (events %v)", got, tc.code, types(evs))
			}
		})
	}
}
