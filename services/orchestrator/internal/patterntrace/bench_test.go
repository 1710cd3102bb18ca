package patterntrace

import (
	"strings"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// benchEvents is a planned run of n steps: a plan, then per step a failed
// and a successful call, a clarification and its answer, deltas and a
// plan_step_end; then complete.
func benchEvents(steps int) []*baagentv1.Event {
	wp := &baagentv1.WorkPlan{}
	for i := range min(steps, MaxPlanSteps) {
		wp.Steps = append(wp.Steps, &baagentv1.PlanStep{StepNumber: int32(i + 1), Description: "Query the revenue of the month by product"})
	}
	evs := []*baagentv1.Event{ev(0, &baagentv1.StartPayload{Input: "Top 5 products by revenue in March 2026"}), ev(0, wp)}
	obs := strings.Repeat("row,", 500)
	for i := range steps {
		s := int32(i%MaxPlanSteps + 1)
		id := itoa(int64(i))
		evs = append(evs, call(s, "f"+id, "sql_query", false, "no such column")...)
		evs = append(evs,
			ev(s, &baagentv1.ClarificationQuestion{QuestionId: "q" + id, Question: "Which revenue?"}),
			ev(s, &baagentv1.ClarificationAnsweredPayload{QuestionId: "q" + id, Answer: "quantity * unit_price"}),
		)
		evs = append(evs, call(s, "c"+id, "sql_query", true, obs)...)
		for range 8 {
			evs = append(evs, &baagentv1.Event{PlanStep: s, Payload: &baagentv1.Event_TextDelta{TextDelta: &baagentv1.TextDeltaPayload{Delta: "some text"}}})
		}
		evs = append(evs, ev(s, &baagentv1.PlanStepEndPayload{StepNumber: s, Status: baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED}))
	}
	return append(evs, ev(0, &baagentv1.CompletePayload{Content: strings.Repeat("answer ", 200)}))
}

// BenchmarkBuild folds the events of a run into its trace: a typical
// 10-step run and a long 250-step one (more calls than a trace keeps).
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{10, 250} {
		evs := benchEvents(n)
		b.Run(itoa(int64(len(evs)))+"events", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if tr := Build(run(), evs); !tr.GetSuccess() {
					b.Fatal("no success")
				}
			}
		})
	}
}
