package orchestrator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// Tool approval (permission ASK) and the HITL timeouts, driven by the
// scripted test model. The timeouts come from Options, so the tests wait
// one second, not the defaults' 60 s / 300 s.

// guardedTool is a tool whose permission is ASK on the approvingToolRunner.
const guardedTool = "guarded_write"

// approvingToolRunner is the fake toolrunner plus guarded_write, which it
// refuses to run (approval_required) until the request is approved, as the
// real toolrunner does for a tool whose permission is ASK.
type approvingToolRunner struct {
	*fakeToolRunner
}

func (a approvingToolRunner) ListTools(ctx context.Context, req *baagentv1.ListToolsRequest) (*baagentv1.ListToolsResponse, error) {
	resp, err := a.fakeToolRunner.ListTools(ctx, req)
	if err == nil {
		resp.Tools = append(resp.Tools, &baagentv1.ToolDefinition{Schema: &baagentv1.ToolSchema{Name: guardedTool, Description: "writes; asks first"}, Source: "builtin"})
	}
	return resp, err
}

func (a approvingToolRunner) Invoke(ctx context.Context, req *baagentv1.InvokeRequest) (*baagentv1.InvokeResponse, error) {
	r := req.GetRequest()
	if r.GetToolName() != guardedTool || r.GetApproved() {
		return a.fakeToolRunner.Invoke(ctx, req)
	}
	a.mu.Lock()
	a.calls = append(a.calls, r)
	a.mu.Unlock()
	return &baagentv1.InvokeResponse{Result: &baagentv1.ToolExecutionResult{
		ToolCallId: r.GetToolCallId(), ApprovalRequired: true,
		ErrorType: baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED, ErrorCode: "APPROVAL_REQUIRED",
	}}, nil
}

func approvalHarness(t *testing.T) *harness {
	tools := newFakeToolRunner()
	h := newHarness(t, func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		if res, ok := lastToolResult(req); ok {
			return answer("After the write: " + res), nil
		}
		return callTools("Write the report.", "call_w", guardedTool, `{"path":"report.md"}`), nil
	}, harnessOptions{toolrunner: approvingToolRunner{tools}})
	h.tools = tools
	return h
}

// approvalAsked waits until the run asks to approve guarded_write and
// returns the decision.
func approvalAsked(ctx context.Context, t *testing.T, h *harness, runID string) *baagentv1.DecisionPoint {
	t.Helper()
	d := h.waitState(ctx, runID, baagentv1.RunState_RUN_STATE_WAITING_INPUT).GetPendingInput().GetDecision()
	labels := []string{}
	for _, o := range d.GetOptions() {
		labels = append(labels, o.GetLabel())
	}
	if !strings.HasPrefix(d.GetDecisionId(), "perm_") || !slices.Equal(labels, []string{hitl.LabelAllow, hitl.LabelDeny}) ||
		!d.GetOptions()[1].GetIsRecommended() || !contains(d.GetContext(), guardedTool, "report.md") {
		t.Fatalf("approval question %v", d)
	}
	return d
}

func guardedInvocations(h *harness) (all, approved int) {
	for _, inv := range h.tools.invocations() {
		if inv.GetToolName() == guardedTool {
			all++
			if inv.GetApproved() {
				approved++
			}
		}
	}
	return all, approved
}

func TestPermissionAskApproved(t *testing.T) {
	ctx := testCtx(t)
	h := approvalHarness(t)
	run := h.start(ctx, &baagentv1.RunSpec{Input: "write the report"})
	d := approvalAsked(ctx, t, h, run.GetRunId())
	if all, approved := guardedInvocations(h); all != 1 || approved != 0 {
		t.Fatalf("before the answer: %d calls, %d approved", all, approved)
	}
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), Answer: "Allow"}); err != nil {
		t.Fatal(err)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	got := types(evs)
	asked, answered := indexOf(got, "permission_asked"), indexOf(got, "permission_replied")
	if asked < 0 || answered < asked || indexOf(got, "decision_asked") >= 0 {
		t.Fatalf("events %v", got)
	}
	if a := evs[asked].GetPermissionAsked(); a.GetToolName() != guardedTool || a.GetToolCallId() == "" ||
		!strings.Contains(a.GetArguments(), "report.md") || a.GetDecision().GetDecisionId() != d.GetDecisionId() {
		t.Errorf("permission_asked %v", a)
	}
	if r := evs[answered].GetPermissionReplied(); r.GetReply() != hitl.LabelAllow || r.GetTimedOut() || r.GetToolName() != guardedTool ||
		r.GetDecisionId() != d.GetDecisionId() || r.GetToolCallId() != evs[asked].GetPermissionAsked().GetToolCallId() {
		t.Errorf("permission_replied %v", r)
	}
	obs := evs[indexOf(got, "observe")].GetObserve()
	if !obs.GetSuccess() || obs.GetToolName() != guardedTool || indexOf(got, "observe") < answered {
		t.Errorf("observe %v", obs)
	}
	if all, approved := guardedInvocations(h); all != 2 || approved != 1 {
		t.Errorf("%d calls, %d approved", all, approved)
	}
	if c := evs[len(evs)-1].GetComplete().GetContent(); !strings.Contains(c, guardedTool+" ok") {
		t.Errorf("final %q", c)
	}
}

func TestPermissionAskDenied(t *testing.T) {
	ctx := testCtx(t)
	h := approvalHarness(t)
	run := h.start(ctx, &baagentv1.RunSpec{Input: "write the report"})
	d := approvalAsked(ctx, t, h, run.GetRunId())
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), SelectedOptions: []string{"deny"}}); err != nil {
		t.Fatal(err)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	got := types(evs)
	if r := evs[max(0, indexOf(got, "permission_replied"))].GetPermissionReplied(); r.GetReply() != hitl.LabelDeny || r.GetTimedOut() {
		t.Errorf("permission_replied %v in %v", r, got)
	}
	obs := evs[indexOf(got, "observe")].GetObserve()
	if obs.GetSuccess() || obs.GetErrorCode() != codePermissionDeny || obs.GetErrorType() != baagentv1.ToolErrorType_TOOL_ERROR_TYPE_PERMISSION_DENIED {
		t.Errorf("observe %v", obs)
	}
	if all, approved := guardedInvocations(h); all != 1 || approved != 0 {
		t.Errorf("%d calls, %d approved: a denied tool ran", all, approved)
	}
	if c := evs[len(evs)-1].GetComplete().GetContent(); !contains(c, "The user denied running "+guardedTool, "it did not run") {
		t.Errorf("final %q", c)
	}
}

func TestUnansweredDoomLoopStopsTheRun(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, _ ModelRequest) (*ModelResponse, error) {
		return callTools("", "call_"+string(rune('a'+n)), "noop", `{"same":true}`), nil
	}, harnessOptions{mutate: func(o *Options) { o.DecisionTimeout = time1s }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "stuck"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	got := types(evs)
	det := indexOf(got, "doom_loop_detected")
	ans := indexOf(got, "decision_answered")
	if det < 0 || ans < det || !evs[ans].GetDecisionAnswered().GetTimedOut() || evs[ans].GetDecisionAnswered().GetAnswer() != hitl.LabelStop {
		t.Fatalf("events %v", got)
	}
	if d := evs[det+1].GetDecisionAsked(); d.GetTimeoutSeconds() != 1 {
		t.Errorf("decision %v", d)
	}
	e := evs[len(evs)-1].GetError()
	if e.GetCode() != CodeDoomLoop || !contains(e.GetMessage(), "noop", "no one answered within 1 s", "stopped without an answer") {
		t.Errorf("last %v", evs[len(evs)-1])
	}
	final := h.waitRun(ctx, run.GetRunId())
	if final.GetState() != baagentv1.RunState_RUN_STATE_FAILED || final.GetError().GetCode() != CodeDoomLoop {
		t.Errorf("record %v", final)
	}
	if n := len(h.tools.invocations()); n != 2 {
		t.Errorf("the repeated call ran %d times", n)
	}
}

func TestClarificationTimeoutFromOptions(t *testing.T) {
	ctx := testCtx(t)
	// clarifyArgs sets no timeout_seconds: Options.ClarificationTimeout
	// applies.
	h := newHarness(t, askThenQuote(AskClarificationTool, clarifyArgs), harnessOptions{mutate: func(o *Options) { o.ClarificationTimeout = time1s }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "compare revenue"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	got := types(evs)
	asked, ans := indexOf(got, "clarification_asked"), indexOf(got, "clarification_answered")
	if asked < 0 || ans < asked || evs[asked].GetClarificationAsked().GetTimeoutSeconds() != 1 {
		t.Fatalf("events %v", got)
	}
	if a := evs[ans].GetClarificationAnswered(); !a.GetTimedOut() || a.GetAnswer() != "Q3 and Q4" {
		t.Errorf("answered %v", a)
	}
	if c := evs[len(evs)-1].GetComplete().GetContent(); !strings.Contains(c, `did not answer within 1 s; continuing with the recommended option "Q3 and Q4"`) {
		t.Errorf("final %q", c)
	}
}

// time1s is the injected timeout: the shortest a question can state
// (timeout_seconds is whole seconds).
const time1s = time.Second
