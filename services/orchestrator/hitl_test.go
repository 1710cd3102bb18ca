package orchestrator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// lastToolResult is the content of the request's latest tool message.
func lastToolResult(req ModelRequest) (string, bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.GetRole() == baagentv1.Role_ROLE_TOOL {
			return m.GetContent(), true
		}
	}
	return "", false
}

// askThenQuote asks with tool and args, then answers quoting the result.
func askThenQuote(tool, args string) turnFunc {
	return func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		if res, ok := lastToolResult(req); ok {
			return answer("Based on your answer — " + res), nil
		}
		return callTools("I need to know the scope first.", "call_ask", tool, args), nil
	}
}

// waitState polls GetRun until the run is in state st.
func (h *harness) waitState(ctx context.Context, runID string, st baagentv1.RunState) *baagentv1.Run {
	h.t.Helper()
	var run *baagentv1.Run
	testkit.Eventually(h.t, remaining(ctx), "run "+runID+" in state "+st.String(), func() bool {
		resp, err := h.client.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: runID})
		run = resp.GetRun()
		return err == nil && run.GetState() == st
	})
	return run
}

func (h *harness) submit(ctx context.Context, runID string, in *baagentv1.RunInput) error {
	_, err := h.client.SubmitInput(ctx, &baagentv1.OrchestratorServiceSubmitInputRequest{Tenant: testTenant, RunId: runID, Input: in})
	return err
}

const clarifyArgs = `{"question_type":"scope","question":"Should the analysis include Q3 as well as Q4?","options":[` +
	`{"label":"Only Q4","description":"latest quarter"},{"label":"Q3 and Q4","description":"quarter over quarter","is_recommended":true}],"required":true}`

func TestClarificationPausesAndResumesWithTheAnswer(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, askThenQuote(AskClarificationTool, clarifyArgs), harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "compare revenue"})
	waiting := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT)
	q := waiting.GetPendingInput().GetClarification()
	if q.GetQuestionId() == "" || len(q.GetOptions()) != 2 || q.GetTimeoutSeconds() != 60 || !q.GetRequired() || waiting.GetPendingInput().GetDeadline() == nil {
		t.Fatalf("pending input %v", waiting.GetPendingInput())
	}
	// A waiting run holds no goroutine: it is not among the executing runs.
	testkit.Eventually(t, 10*time.Second, "a waiting run released by its replica", func() bool { return h.srv.local(run.GetRunId()) == nil })
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: "q_other", Answer: "Only Q4"}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "input.input_id") {
		t.Errorf("wrong input_id: %v", err)
	}
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: q.GetQuestionId(), SelectedOptions: []string{"Only Q4", "Q3 and Q4"}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("two answers to a clarification: %v", err)
	}
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: q.GetQuestionId(), Answer: "only q4"}); err != nil {
		t.Fatal(err)
	}
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: q.GetQuestionId(), Answer: "Only Q4"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second answer: %v", err)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	got := types(evs)
	asked, answered := indexOf(got, "clarification_asked"), indexOf(got, "clarification_answered")
	if asked < 0 || answered < asked {
		t.Fatalf("events %v", got)
	}
	if a := evs[answered].GetClarificationAnswered(); a.GetAnswer() != "Only Q4" || a.GetTimedOut() || a.GetQuestionId() != q.GetQuestionId() {
		t.Errorf("answered %v", a)
	}
	if c := evs[len(evs)-1].GetComplete(); !strings.Contains(c.GetContent(), "The user answered: Only Q4") {
		t.Errorf("final %v", evs[len(evs)-1])
	}
	final := h.waitRun(ctx, run.GetRunId())
	if final.GetPendingInput() != nil || final.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Errorf("final record %v", final)
	}
}

func TestDecisionValidatedAgainstItsOptions(t *testing.T) {
	ctx := testCtx(t)
	args := `{"decision_type":"method","context":"The orders table has 2M rows.","options":[{"label":"Sample","is_recommended":true},{"label":"Full scan","estimated_duration_ms":900000}]}`
	h := newHarness(t, askThenQuote(AskDecisionTool, args), harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "analyse orders"})
	waiting := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT)
	d := waiting.GetPendingInput().GetDecision()
	if d.GetTimeoutSeconds() != 300 || d.GetDecisionType() != baagentv1.DecisionType_DECISION_TYPE_METHOD || d.GetOptions()[1].GetEstimatedDurationMs() != 900000 {
		t.Fatalf("decision %v", d)
	}
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), Answer: "Something else"}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "input.answer") {
		t.Errorf("an answer that is no option: %v", err)
	}
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), SelectedOptions: []string{"full scan"}}); err != nil {
		t.Fatal(err)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	i := indexOf(types(evs), "decision_answered")
	if i < 0 || evs[i].GetDecisionAnswered().GetAnswer() != "Full scan" {
		t.Fatalf("events %v", types(evs))
	}
	if !strings.Contains(evs[len(evs)-1].GetComplete().GetContent(), "Full scan") {
		t.Errorf("final %v", evs[len(evs)-1])
	}
}

func TestUnansweredDecisionTimesOutToTheRecommendedOption(t *testing.T) {
	ctx := testCtx(t)
	args := `{"decision_type":"branch","context":"Which region first?","options":[{"label":"EMEA"},{"label":"APAC","is_recommended":true}],"timeout_seconds":1}`
	h := newHarness(t, askThenQuote(AskDecisionTool, args), harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "regional report"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	i := indexOf(types(evs), "decision_answered")
	if i < 0 {
		t.Fatalf("events %v", types(evs))
	}
	if a := evs[i].GetDecisionAnswered(); !a.GetTimedOut() || a.GetAnswer() != "APAC" {
		t.Errorf("answered %v", a)
	}
	if c := evs[len(evs)-1].GetComplete().GetContent(); !strings.Contains(c, `did not answer within 1 s; continuing with the recommended option "APAC"`) {
		t.Errorf("final %q", c)
	}
}

func TestDoomLoopAsksAndStops(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, _ ModelRequest) (*ModelResponse, error) {
		return callTools("", "call_"+string(rune('a'+n)), "noop", `{"same":true}`), nil
	}, harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "stuck"})
	waiting := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT)
	d := waiting.GetPendingInput().GetDecision()
	if len(d.GetOptions()) != 3 || d.GetOptions()[0].GetLabel() != hitl.LabelStop || !d.GetOptions()[0].GetIsRecommended() {
		t.Fatalf("doom-loop decision %v", d)
	}
	if n := len(h.tools.invocations()); n != 2 {
		t.Errorf("tool ran %d times before the third identical call was held", n)
	}
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), Intervention: baagentv1.DoomLoopIntervention_DOOM_LOOP_INTERVENTION_STOP}); err != nil {
		t.Fatal(err)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	got := types(evs)
	det := indexOf(got, "doom_loop_detected")
	if det < 0 || got[det+1] != "decision_asked" || evs[det].GetDoomLoopDetected().GetRepeatCount() != 3 || evs[det].GetDoomLoopDetected().GetToolName() != "noop" {
		t.Fatalf("events %v", got)
	}
	last := evs[len(evs)-1].GetError()
	if last.GetCode() != CodeDoomLoop || !strings.Contains(last.GetMessage(), "stopped the run") || indexOf(got, "complete") >= 0 {
		t.Errorf("last %v", evs[len(evs)-1])
	}
	if n := len(h.tools.invocations()); n != 2 {
		t.Errorf("tool ran %d times", n)
	}
}

func TestDoomLoopCorrectTellsTheModel(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		if res, ok := lastToolResult(req); ok && strings.Contains(res, codeDoomLoopCorrect) {
			return answer("changed approach"), nil
		}
		return callTools("", "call_"+string(rune('a'+n)), "noop", `{}`), nil
	}, harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "stuck"})
	d := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT).GetPendingInput().GetDecision()
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), Answer: "correct"}); err != nil {
		t.Fatal(err)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetComplete().GetContent() != "changed approach" {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
}

func TestCancelWaitingRun(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, askThenQuote(AskClarificationTool, clarifyArgs), harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "compare revenue"})
	h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT)
	resp, err := h.client.CancelRun(ctx, &baagentv1.OrchestratorServiceCancelRunRequest{Tenant: testTenant, RunId: run.GetRunId(), Reason: "not needed"})
	if err != nil || resp.GetRun().GetState() != baagentv1.RunState_RUN_STATE_CANCELLED {
		t.Fatalf("CancelRun = %v, %v", resp.GetRun(), err)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if evs[len(evs)-1].GetCancelled().GetReason() != "not needed" {
		t.Errorf("events %v", types(evs))
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// A client that answers the moment it sees the question (no retry) finds
// the run waiting: the question is published only after the run is on
// record as waiting for it.
func TestAnswerTheMomentTheQuestionIsSeen(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, askThenQuote(AskClarificationTool, clarifyArgs), harnessOptions{})
	for i := range 5 {
		run := h.start(ctx, &baagentv1.RunSpec{Input: "compare revenue"})
		subject, err := natsx.EventSubject(testTenant, run.GetRunId())
		if err != nil {
			t.Fatal(err)
		}
		cons, err := h.js.OrderedConsumer(ctx, natsx.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
		if err != nil {
			t.Fatal(err)
		}
		var q *baagentv1.ClarificationQuestion
		for q == nil {
			msg, err := cons.Next(jetstream.FetchContext(ctx))
			if err != nil {
				t.Fatalf("run %d: waiting for the question: %v", i, err)
			}
			ev := &baagentv1.Event{}
			if err := proto.Unmarshal(msg.Data(), ev); err != nil {
				t.Fatal(err)
			}
			q = ev.GetClarificationAsked()
		}
		if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: q.GetQuestionId(), Answer: "Only Q4"}); err != nil {
			t.Fatalf("run %d: an answer sent the moment the question was seen: %v", i, err)
		}
		if final := h.waitRun(ctx, run.GetRunId()); final.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
			t.Fatalf("run %d ended %v", i, final.GetState())
		}
	}
}
