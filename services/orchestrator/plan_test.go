package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

const twoSteps = `{"steps":[{"description":"first","expected_output":"a"},{"description":"second","expected_output":"b"}]}`

func markDone(n string) string {
	return `{"reason":"done","mark":{"step_number":` + n + `,"status":"completed","summary":"step ` + n + ` done"}}`
}

func countType(evs []*baagentv1.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.GetType() == typ {
			n++
		}
	}
	return n
}

func warnings(evs []*baagentv1.Event) []string {
	var out []string
	for _, e := range evs {
		if w := e.GetWarning(); w != nil {
			out = append(out, w.GetCode())
		}
	}
	return out
}

// TestPlanResumesAtCurrentStepOnAnotherReplica: the replica executing a
// planned run stops during plan step 2; another replica resumes the run at
// step 2 without redoing step 1 (no second plan, no second noop call of
// step 1, no second plan_step_start of step 1).
func TestPlanResumesAtCurrentStepOnAnotherReplica(t *testing.T) {
	ctx := testCtx(t)
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	blocked := false
	h := newHarness(t, func(ctx context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		switch n {
		case 0:
			return callTools("planning", "c0", "plan", twoSteps), nil
		case 1:
			return callTools("step 1", "c1", "noop", `{}`), nil
		case 2:
			return callTools("", "c2", "update_plan", markDone("1")), nil
		case 3:
			mu.Lock()
			first := !blocked
			blocked = true
			mu.Unlock()
			if first { // step 2's first model call: the replica stops here
				started <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return callTools("step 2", "c3", "noop", `{}`), nil
		case 4:
			if !slices.Contains(toolNames(req), "update_plan") || slices.Contains(toolNames(req), "plan") {
				return nil, context.Canceled // wrong phase: fails the run
			}
			return callTools("step 2 again", "c4", "noop", `{}`), nil
		case 5:
			return callTools("", "c5", "update_plan", markDone("2")), nil
		}
		if len(req.Tools) != 0 {
			return answer("synthesis was offered tools"), nil
		}
		return answer("the synthesis"), nil
	}, harnessOptions{mutate: func(o *Options) { o.MaxConcurrentRuns = 1 }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "two steps please", Plan: baagentv1.PlanMode_PLAN_MODE_ALWAYS})
	<-started
	h.stop()
	_, other, _ := h.replica("replica-b")

	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if c := evs[len(evs)-1].GetComplete(); c.GetContent() != "the synthesis" {
		t.Fatalf("events %v, last %v", types(evs), evs[len(evs)-1])
	}
	starts, ends := planStepNumbers(evs)
	if !slices.Equal(starts, []int32{1, 2}) || !slices.Equal(ends, []int32{1, 2}) {
		t.Errorf("plan steps started %v ended %v; events %v", starts, ends, types(evs))
	}
	if n := countType(evs, "start"); n != 1 {
		t.Errorf("%d start events", n)
	}
	noops := 0
	h.tools.mu.Lock()
	for _, c := range h.tools.calls {
		if c.GetToolName() == "noop" {
			noops++
		}
	}
	h.tools.mu.Unlock()
	if noops != 2 { // step 1 once (c1), step 2 once on replica-b (c4): step 1 is not redone
		t.Errorf("noop invoked %d times, want 2", noops)
	}
	got, err := other.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: run.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	final := h.waitRun(ctx, run.GetRunId())
	plan := final.GetPlan()
	if plan.GetTotalSteps() != 2 || plan.GetSteps()[0].GetIterations() != 2 || plan.GetSteps()[1].GetIterations() != 2 ||
		plan.GetSteps()[1].GetStatus() != baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED {
		t.Errorf("final plan %v (GetRun on replica-b: %v)", plan, got.GetRun().GetPlan())
	}
}

// TestPlanNotMadeWarnsAndGoesOn: a model that answers a request it must
// plan is reminded once, then the run goes on unplanned with a warning.
func TestPlanNotMadeWarnsAndGoesOn(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		if n == 0 && (!slices.Equal(toolNames(req), []string{"ask_clarification", "ask_decision", "plan"})) {
			return answer("planning offered " + strings.Join(toolNames(req), ",")), nil
		}
		return answer("no plan from me"), nil
	}, harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "anything", Plan: baagentv1.PlanMode_PLAN_MODE_ALWAYS})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if c := evs[len(evs)-1].GetComplete(); c.GetContent() != "no plan from me" {
		t.Fatalf("last %v", evs[len(evs)-1])
	}
	if w := warnings(evs); !slices.Equal(w, []string{warnPlanNotMade}) {
		t.Errorf("warnings %v", w)
	}
	reqs := h.model.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Messages[len(reqs[1].Messages)-1].GetContent(), "needs a work plan") {
		t.Errorf("%d model calls; the second did not carry the reminder", len(reqs))
	}
	for _, e := range evs {
		if th := e.GetThought(); th != nil && th.GetThoughtLevel() != "work" {
			t.Errorf("planning thought level %q", th.GetThoughtLevel())
		}
	}
}

// TestPlanStepBudgetAndOutOfSteps: a step that does not finish within its
// iterations is marked failed with a warning; a run that reaches its step
// limit mid-plan skips the rest and synthesises.
func TestPlanStepBudgetAndOutOfSteps(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		switch {
		case n == 0:
			return callTools("", "p", "plan", `{"steps":[{"description":"a","expected_output":"x"},{"description":"b","expected_output":"y"},{"description":"c","expected_output":"z"}]}`), nil
		case len(req.Tools) == 0:
			return answer("synthesised from what exists"), nil
		}
		return callTools("", fmt.Sprintf("n%d", n), "noop", fmt.Sprintf(`{"i":%d}`, n)), nil // never marks a step done
	}, harnessOptions{mutate: func(o *Options) { o.PlanStepMaxIterations = 2 }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "x", Plan: baagentv1.PlanMode_PLAN_MODE_ALWAYS, MaxSteps: 5})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if c := evs[len(evs)-1].GetComplete(); c.GetContent() != "synthesised from what exists" {
		t.Fatalf("events %v last %v", types(evs), evs[len(evs)-1])
	}
	// Iterations: 1 plan, 2+3 step 1 (failed), 4 step 2, 5 = the last: synthesis.
	if w := warnings(evs); !slices.Equal(w, []string{warnPlanStepBudget, warnPlanOutOfSteps}) {
		t.Errorf("warnings %v", w)
	}
	final := h.waitRun(ctx, run.GetRunId())
	var statuses []baagentv1.PlanStepStatus
	for _, st := range final.GetPlan().GetSteps() {
		statuses = append(statuses, st.GetStatus())
	}
	want := []baagentv1.PlanStepStatus{baagentv1.PlanStepStatus_PLAN_STEP_STATUS_FAILED, baagentv1.PlanStepStatus_PLAN_STEP_STATUS_SKIPPED, baagentv1.PlanStepStatus_PLAN_STEP_STATUS_SKIPPED}
	if !slices.Equal(statuses, want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	for _, e := range evs {
		if end := e.GetPlanStepEnd(); end != nil && end.GetStepNumber() == 1 && (end.GetSuccess() || end.GetIterations() != 2) {
			t.Errorf("step 1 end %v", end)
		}
	}
}

// TestPlanInvalidCallsAreToolErrors: a malformed plan or update_plan is a
// tool error the model corrects; the plan is not half-changed.
func TestPlanInvalidCallsAreToolErrors(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		switch n {
		case 0:
			return callTools("", "p0", "plan", `{"steps":[]}`), nil
		case 1:
			return callTools("", "p1", "plan", twoSteps), nil
		case 2:
			return callTools("", "u0", "update_plan", `{"reason":"x","mark":{"step_number":1,"status":"completed"},"steps":[`+strings.Repeat(`{"description":"d"},`, 20)+`{"description":"d"}]}`), nil
		case 3:
			return callTools("", "u1", "update_plan", markDone("1")), nil
		case 4:
			return answer("step 2 result in text"), nil
		}
		return answer("final"), nil
	}, harnessOptions{})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "x", Plan: baagentv1.PlanMode_PLAN_MODE_ALWAYS})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	var failed []string
	for _, e := range evs {
		if o := e.GetObserve(); o != nil && !o.GetSuccess() {
			failed = append(failed, o.GetToolCallId()+":"+o.GetErrorCode())
		}
	}
	if !slices.Equal(failed, []string{"p0:" + codePlanInvalid, "u0:" + codePlanInvalid}) {
		t.Errorf("failed calls %v", failed)
	}
	final := h.waitRun(ctx, run.GetRunId())
	if p := final.GetPlan(); p.GetTotalSteps() != 2 || p.GetRevision() != 1 || p.GetSteps()[1].GetSummary() != "step 2 result in text" {
		t.Errorf("plan %v", p)
	}
	if final.GetFinalAnswer() != "final" {
		t.Errorf("answer %q", final.GetFinalAnswer())
	}
}

// TestPlanApprovalEdit: free text in answer to the plan approval is an
// edit: the model is told, proposes again, and the next plan is revision
// 2 with the user's words as its reason.
func TestPlanApprovalEdit(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		switch n {
		case 0:
			return callTools("", "p0", "plan", twoSteps), nil
		case 1:
			if r := lastToolResults(req); len(r) != 1 || !strings.Contains(r[0].GetContent(), "add a step for costs") {
				return answer("the edit did not reach the model"), nil
			}
			return callTools("", "p1", "plan", `{"steps":[{"description":"first"},{"description":"costs"},{"description":"second"}]}`), nil
		}
		return answer("done"), nil
	}, harnessOptions{mutate: func(o *Options) { o.PlanApproval = true }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "x", Plan: baagentv1.PlanMode_PLAN_MODE_ALWAYS})
	for _, answer := range []string{"add a step for costs", "approve"} {
		d := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT).GetPendingInput().GetDecision()
		if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), Answer: answer}); err != nil {
			t.Fatal(err)
		}
		if answer == "approve" {
			break
		}
		testkitWaitDecisionChange(ctx, t, h, run.GetRunId(), d.GetDecisionId())
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	var revs []int32
	for _, e := range evs {
		if p := e.GetWorkPlan(); p != nil {
			revs = append(revs, p.GetRevision())
		}
	}
	final := h.waitRun(ctx, run.GetRunId())
	if p := final.GetPlan(); p.GetTotalSteps() != 3 || p.GetRevision() != 2 || !strings.Contains(p.GetReason(), "add a step for costs") {
		t.Errorf("plan %v (work_plan revisions %v)", p, revs)
	}
}

// testkitWaitDecisionChange waits until the run asks a decision other
// than id.
func testkitWaitDecisionChange(ctx context.Context, t *testing.T, h *harness, runID, id string) {
	t.Helper()
	for {
		run := h.waitState(ctx, runID, baagentv1.RunState_RUN_STATE_WAITING_INPUT)
		if d := run.GetPendingInput().GetDecision(); d != nil && d.GetDecisionId() != id {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("no new decision")
		}
	}
}

func TestParseComplexityAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want baagentv1.QueryComplexity
	}{
		{"SIMPLE", baagentv1.QueryComplexity_QUERY_COMPLEXITY_SIMPLE},
		{" moderate.\n", baagentv1.QueryComplexity_QUERY_COMPLEXITY_MODERATE},
		{"**COMPLEX**", baagentv1.QueryComplexity_QUERY_COMPLEXITY_COMPLEX},
	} {
		if got, err := parseComplexityAnswer(tc.in); err != nil || got != tc.want {
			t.Errorf("%q: %v %v", tc.in, got, err)
		}
	}
	if _, err := parseComplexityAnswer("It is complex because"); err == nil {
		t.Error("a sentence accepted")
	}
}

// TestComplexityByModel: with the model classifier the run's model judges
// the request in one call without tools; an answer that is not one of the
// three levels lets the rules decide, with a warning.
func TestComplexityByModel(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		if len(req.Messages) > 0 && req.Messages[0].GetContent() == classifyPrompt {
			if len(req.Tools) != 0 {
				return answer("tools offered to the classifier"), nil
			}
			if strings.Contains(req.Messages[1].GetContent(), "judge me complex") {
				return answer("COMPLEX"), nil
			}
			return answer("it depends"), nil
		}
		return answer("answered"), nil
	}, harnessOptions{mutate: func(o *Options) { o.ComplexityClassifier = ComplexityModel }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "judge me complex"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	s := evs[0].GetStart()
	if s.GetQueryComplexity() != baagentv1.QueryComplexity_QUERY_COMPLEXITY_COMPLEX || !slices.Contains(s.GetComplexitySignals(), "model") {
		t.Errorf("start %v", s)
	}
	if w := warnings(evs); !slices.Equal(w, []string{warnPlanNotMade}) { // COMPLEX must plan; this model never does
		t.Errorf("warnings %v", w)
	}

	run = h.start(ctx, &baagentv1.RunSpec{Input: "hi"})
	evs = h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if s := evs[0].GetStart(); s.GetQueryComplexity() != baagentv1.QueryComplexity_QUERY_COMPLEXITY_SIMPLE || slices.Contains(s.GetComplexitySignals(), "model") {
		t.Errorf("start %v", s)
	}
	if w := warnings(evs); !slices.Equal(w, []string{warnComplexityFailed}) {
		t.Errorf("warnings %v", w)
	}
}

// planStepNumbers returns the step numbers of the plan_step_start and of
// the plan_step_end events in evs, in stream order.
func planStepNumbers(evs []*baagentv1.Event) (starts, ends []int32) {
	for _, e := range evs {
		if s := e.GetPlanStepStart(); s != nil {
			starts = append(starts, s.GetStepNumber())
		}
		if s := e.GetPlanStepEnd(); s != nil {
			ends = append(ends, s.GetStepNumber())
		}
	}
	return starts, ends
}
