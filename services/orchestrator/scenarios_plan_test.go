package orchestrator

import (
	"slices"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// planCheck asserts what every planned run's events show: the start's
// complexity, one work_plan at least, each plan step started and ended in
// order with its events tagged, and a complete answer.
func planCheck(t *testing.T, evs []*baagentv1.Event, wantSteps int32, wantRevision int32) {
	t.Helper()
	start := evs[0].GetStart()
	if start.GetQueryComplexity() != baagentv1.QueryComplexity_QUERY_COMPLEXITY_COMPLEX || start.GetPlanMode() != baagentv1.PlanMode_PLAN_MODE_AUTO || len(start.GetComplexitySignals()) == 0 {
		t.Errorf("start %v", start)
	}
	var last *baagentv1.WorkPlan
	var started, ended []int32
	cur := int32(0)
	for _, e := range evs {
		switch {
		case e.GetWorkPlan() != nil:
			last = e.GetWorkPlan()
		case e.GetPlanStepStart() != nil:
			cur = e.GetPlanStepStart().GetStepNumber()
			started = append(started, cur)
			if e.GetPlanStep() != cur {
				t.Errorf("plan_step_start %d has plan_step %d", cur, e.GetPlanStep())
			}
		case e.GetPlanStepEnd() != nil:
			end := e.GetPlanStepEnd()
			ended = append(ended, end.GetStepNumber())
			if !end.GetSuccess() || end.GetStatus() != baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED || end.GetIterations() < 1 || end.GetSummary() == "" {
				t.Errorf("plan_step_end %v", end)
			}
			if e.GetPlanStep() != end.GetStepNumber() {
				t.Errorf("plan_step_end %d has plan_step %d", end.GetStepNumber(), e.GetPlanStep())
			}
			cur = 0
		case e.GetAct() != nil && e.GetAct().GetToolName() == "sql_query":
			if cur == 0 || e.GetPlanStep() != cur {
				t.Errorf("act in plan step %d has plan_step %d", cur, e.GetPlanStep())
			}
		case e.GetThought() != nil && e.GetThought().GetThoughtLevel() == "":
			t.Errorf("thought without a level: %v", e)
		case e.GetWarning() != nil:
			t.Errorf("warning %v", e.GetWarning())
		}
	}
	want := make([]int32, wantSteps)
	for i := range want {
		want[i] = int32(i + 1)
	}
	if !slices.Equal(started, want) || !slices.Equal(ended, want) {
		t.Errorf("plan steps started %v, ended %v, want %v", started, ended, want)
	}
	if last.GetTotalSteps() != wantSteps || last.GetRevision() != wantRevision || last.GetCurrentStep() != 0 {
		t.Errorf("last work_plan %v", last)
	}
	for _, st := range last.GetSteps() {
		if st.GetStatus() != baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED {
			t.Errorf("step %v", st)
		}
	}
	if c := evs[len(evs)-1].GetComplete(); c == nil || c.GetFormat() != "markdown" || c.GetContent() == "" {
		t.Errorf("last event %v", evs[len(evs)-1])
	}
}

// TestPlanScenarios plays the planning scenarios through the whole
// pipeline: a complex request is planned, its steps run in order and the
// synthesis answers; a plan revised mid-run publishes its new revision.
func TestPlanScenarios(t *testing.T) {
	h, _ := scenarioHarness(t)
	for _, tc := range []struct {
		input         string
		steps, rev    int32
		answerHas     []string
		firstThoughts string
	}{
		{"Compare Q3 and Q4 2025 revenue by region and customer segment and write a report.", 2, 1, []string{"By region", "By customer segment"}, "work"},
		{"Analyse 2025 revenue by region and by product category, compare the two halves of the year, and write a report.", 3, 2, []string{"By region", "By customer segment", "By product category"}, "work"},
	} {
		t.Run(tc.input[:20], func(t *testing.T) {
			ctx := testCtx(t)
			run := h.start(ctx, &baagentv1.RunSpec{Input: tc.input})
			evs := h.events(ctx, run.GetRunId())
			checkEnvelope(t, run, evs)
			planCheck(t, evs, tc.steps, tc.rev)
			t.Logf("events: %v", types(evs))
			answer := evs[len(evs)-1].GetComplete().GetContent()
			for _, s := range tc.answerHas {
				if !strings.Contains(answer, s) {
					t.Errorf("answer lacks %q:\n%s", s, answer)
				}
			}
			for _, e := range evs {
				if th := e.GetThought(); th != nil {
					if th.GetThoughtLevel() != tc.firstThoughts {
						t.Errorf("first thought level %q", th.GetThoughtLevel())
					}
					break
				}
			}
			got := h.waitRun(ctx, run.GetRunId())
			if got.GetQueryComplexity() != baagentv1.QueryComplexity_QUERY_COMPLEXITY_COMPLEX || got.GetPlan().GetTotalSteps() != tc.steps || got.GetPlan().GetRevision() != tc.rev {
				t.Errorf("run record: complexity %v plan %v", got.GetQueryComplexity(), got.GetPlan())
			}
			if tc.rev > 1 && !strings.Contains(got.GetPlan().GetReason(), "segments") {
				t.Errorf("revision reason %q", got.GetPlan().GetReason())
			}
		})
	}
}

// TestPlanNeverAndSimpleDoNotPlan: plan NEVER runs a complex request flat,
// and a simple request is never offered the plan tool.
func TestPlanNeverAndSimpleDoNotPlan(t *testing.T) {
	h, _ := scenarioHarness(t)
	ctx := testCtx(t)
	run := h.start(ctx, &baagentv1.RunSpec{Input: "Which product category had the highest revenue last quarter?"})
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if s := evs[0].GetStart(); s.GetQueryComplexity() != baagentv1.QueryComplexity_QUERY_COMPLEXITY_SIMPLE {
		t.Errorf("start %v", s)
	}
	for _, e := range evs {
		if e.GetWorkPlan() != nil || e.GetPlanStep() != 0 || e.GetPlanStepStart() != nil {
			t.Fatalf("a simple request planned: %v", e)
		}
	}
	run = h.start(ctx, &baagentv1.RunSpec{Input: "Compare Q3 and Q4 2025 revenue by region and customer segment and write a report.", Plan: baagentv1.PlanMode_PLAN_MODE_NEVER})
	evs = h.events(ctx, run.GetRunId())
	checkEnvelope(t, run, evs)
	if s := evs[0].GetStart(); s.GetPlanMode() != baagentv1.PlanMode_PLAN_MODE_NEVER || s.GetQueryComplexity() != baagentv1.QueryComplexity_QUERY_COMPLEXITY_COMPLEX {
		t.Errorf("start %v", s)
	}
	for _, e := range evs {
		if e.GetWorkPlan() != nil || e.GetPlanStepStart() != nil {
			t.Fatalf("plan NEVER planned: %v", e)
		}
		// The model's plan call is not offered: the toolrunner does not know it.
		if o := e.GetObserve(); o != nil && o.GetToolName() == "plan" && o.GetSuccess() {
			t.Fatalf("plan answered under NEVER: %v", o)
		}
	}
}

// TestPlanApproval: with plan_approval ASK the plan is put to the user as
// a decision before it runs; approve runs it, cancel cancels the run.
func TestPlanApproval(t *testing.T) {
	h, _ := scenarioHarness(t)
	const input = "Prepare a comprehensive board report comparing 2025 H1 and H2 revenue by region and product category."
	for _, answer := range []string{hitl.LabelApprove, hitl.LabelCancel} {
		t.Run(answer, func(t *testing.T) {
			ctx := testCtx(t)
			run := h.start(ctx, &baagentv1.RunSpec{Input: input, PlanApproval: baagentv1.PlanApproval_PLAN_APPROVAL_ASK})
			waiting := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT)
			d := waiting.GetPendingInput().GetDecision()
			if d == nil || !strings.Contains(d.GetContext(), "Revenue by region and product category") || len(d.GetOptions()) != 3 {
				t.Fatalf("pending %v", waiting.GetPendingInput())
			}
			if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), Answer: answer}); err != nil {
				t.Fatal(err)
			}
			evs := h.events(ctx, run.GetRunId())
			checkEnvelope(t, run, evs)
			got := types(evs)
			if i, j := indexOf(got, "work_plan"), indexOf(got, "decision_asked"); i < 0 || j < i {
				t.Errorf("work_plan then decision_asked expected: %v", got)
			}
			last := evs[len(evs)-1]
			switch answer {
			case hitl.LabelApprove:
				planCheck(t, evs, 1, 1)
			case hitl.LabelCancel:
				if last.GetCancelled() == nil || !strings.Contains(last.GetCancelled().GetReason(), "plan") {
					t.Errorf("last %v", last)
				}
				if indexOf(got, "plan_step_start") >= 0 {
					t.Errorf("a cancelled plan ran: %v", got)
				}
			}
		})
	}
}
