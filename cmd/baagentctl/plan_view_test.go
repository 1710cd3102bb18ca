package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// The live view prints the plan as a checklist once per revision and
// ticks its steps off as they end.
func TestLiveViewShowsThePlanAsAChecklist(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	v := &liveView{w: &out}
	plan := func(rev int32, reason string, statuses ...baagentv1.PlanStepStatus) *baagentv1.Event {
		p := &baagentv1.WorkPlan{PlanId: "p", Revision: rev, Reason: reason}
		for i, s := range statuses {
			p.Steps = append(p.Steps, &baagentv1.PlanStep{StepNumber: int32(i + 1), Description: "step " + string(rune('A'+i)), ExpectedOutput: "out", Status: s})
		}
		p.TotalSteps = int32(len(p.Steps))
		return &baagentv1.Event{Payload: &baagentv1.Event_WorkPlan{WorkPlan: p}}
	}
	pending, running, done := baagentv1.PlanStepStatus_PLAN_STEP_STATUS_PENDING, baagentv1.PlanStepStatus_PLAN_STEP_STATUS_IN_PROGRESS, baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED
	for _, ev := range []*baagentv1.Event{
		{Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{Model: "m", QueryComplexity: baagentv1.QueryComplexity_QUERY_COMPLEXITY_COMPLEX, ComplexitySignals: []string{"analysis", "time_span"}}}},
		plan(1, "", running, pending),
		{Payload: &baagentv1.Event_PlanStepStart{PlanStepStart: &baagentv1.PlanStepStartPayload{StepNumber: 1, TotalSteps: 2, Description: "step A"}}},
		{Payload: &baagentv1.Event_PlanStepEnd{PlanStepEnd: &baagentv1.PlanStepEndPayload{StepNumber: 1, TotalSteps: 2, Success: true, Iterations: 2, DurationMs: 1500, Status: done, Summary: "found A"}}},
		plan(1, "", done, running), // same revision: not reprinted
		plan(2, "found more", done, running, pending),
		{Payload: &baagentv1.Event_Warning{Warning: &baagentv1.WarningPayload{Code: "PLAN_STEP_BUDGET", Message: "step 2 ran out"}}},
	} {
		if err := v.show(ev); err != nil {
			t.Fatal(err)
		}
	}
	got := out.String()
	for _, want := range []string{
		"complexity complex (analysis, time_span)", "plan: 2 steps", "  ▶ 1. step A → out", "  □ 2. step B → out",
		"▶ plan step 1/2: step A", "✓ plan step 1/2 done (2 iterations, 1.5 s)", "found A",
		"plan revised (revision 2: found more): 3 steps", "  ✓ 1. step A", "! warning: step 2 ran out (PLAN_STEP_BUDGET)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "plan: 2 steps"); n != 1 {
		t.Errorf("checklist printed %d times:\n%s", n, got)
	}
}

func TestPrintRunShowsComplexityAndPlan(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	c := &cli{stdout: &out}
	c.printRun(&baagentv1.Run{RunId: "run_1", QueryComplexity: baagentv1.QueryComplexity_QUERY_COMPLEXITY_MODERATE, Plan: &baagentv1.WorkPlan{
		Revision: 1, TotalSteps: 1, Steps: []*baagentv1.PlanStep{{StepNumber: 1, Description: "only", Status: baagentv1.PlanStepStatus_PLAN_STEP_STATUS_FAILED, Summary: "ran out"}},
	}})
	for _, want := range []string{"complexity", "moderate", "1 steps, revision 1", "✗ 1. only", "ran out"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParsePlanFlags(t *testing.T) {
	t.Parallel()
	if m, a, err := parsePlanFlags("ALWAYS", "ask"); err != nil || m != baagentv1.PlanMode_PLAN_MODE_ALWAYS || a != baagentv1.PlanApproval_PLAN_APPROVAL_ASK {
		t.Errorf("%v %v %v", m, a, err)
	}
	for _, bad := range [][2]string{{"sometimes", ""}, {"auto", "maybe"}} {
		if _, _, err := parsePlanFlags(bad[0], bad[1]); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// ask shows a complex question's plan, ticked off live, through the
// whole suite; runs get shows the plan as it ended.
func TestAskShowsThePlanLive(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	env := startGatewaySuite(t)
	code, out, errOut := ctlRun(ctx, env, "ask", "Compare Q3 and Q4 2025 revenue by region and customer segment and write a report.")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"complexity complex", "plan: 2 steps", "▶ plan step 1/2: Revenue by region", "✓ plan step 1/2 done (2 iterations",
		"▶ plan step 2/2", "✓ plan step 2/2 done", "By customer segment", "completed in 6 steps"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	runID := strings.Fields(strings.TrimPrefix(out, "run "))[0]
	code, out, errOut = ctlRun(ctx, env, "runs get", runID)
	if code != 0 || !strings.Contains(out, "2 steps, revision 1") || !strings.Contains(out, "✓ 2. Revenue by customer segment") {
		t.Errorf("runs get: exit %d\n%s\n%s", code, out, errOut)
	}
}
