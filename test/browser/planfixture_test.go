package browser

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

// planFixtureRun is the run id of the fixture's events.
const planFixtureRun = "run_plan_fixture"

// planFixture is a planned run's event sequence as the orchestrator
// publishes it: complexity in start, a three-step plan, step 1 done, a
// revision to four steps with its reason, a failed step, a done step, a
// warning, the last step skipped, the answer. dashboard.mjs (plan.mjs)
// feeds it to the page's event dispatch, so the checklist is tested
// whatever the orchestrator of this build emits.
func planFixture() []*baagentv1.Event {
	const (
		pending = baagentv1.PlanStepStatus_PLAN_STEP_STATUS_PENDING
		done    = baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED
	)
	step := func(n int32, desc, want string, st baagentv1.PlanStepStatus) *baagentv1.PlanStep {
		return &baagentv1.PlanStep{StepNumber: n, Description: desc, ExpectedOutput: want, Status: st}
	}
	rev1 := &baagentv1.WorkPlan{PlanId: "plan_fixture", Revision: 1, TotalSteps: 3, Steps: []*baagentv1.PlanStep{
		step(1, "Revenue by region for 2025 H1 and H2", "a table per region and half", pending),
		step(2, "Revenue by product category for 2025 H1 and H2", "a table per category and half", pending),
		step(3, "Write the report", "the report", pending),
	}}
	first := step(1, "Revenue by region for 2025 H1 and H2", "a table per region and half", done)
	first.Summary, first.Iterations, first.DurationMs = "Revenue per region for 2025 H1 and H2.", 2, 412
	rev2 := &baagentv1.WorkPlan{PlanId: "plan_fixture", Revision: 2, TotalSteps: 4,
		Reason: "the regions diverge between the halves; check the customer segments before the categories",
		Steps: []*baagentv1.PlanStep{
			first,
			step(2, "Revenue by customer segment for 2025 H1 and H2", "a table per segment and half", pending),
			step(3, "Revenue by product category for 2025 H1 and H2", "a table per category and half", pending),
			step(4, "Write the report", "the report", pending),
		}}
	evs := []*baagentv1.Event{
		{PlanStep: 0, Payload: &baagentv1.Event_Start{Start: &baagentv1.StartPayload{
			Input: "Analyse 2025 revenue by region and by product category, compare the two halves of the year, and write a report.",
			Model: "scripted", ScriptedModel: true, MaxSteps: 20,
			QueryComplexity:   baagentv1.QueryComplexity_QUERY_COMPLEXITY_COMPLEX,
			ComplexitySignals: []string{"long", "several_requests", "analysis:compare", "time_span", "entities:2"},
			PlanMode:          baagentv1.PlanMode_PLAN_MODE_AUTO,
		}}},
		{PlanStep: 0, Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: 1}}},
		{PlanStep: 0, Payload: &baagentv1.Event_Thought{Thought: &baagentv1.ThoughtPayload{Thought: "Plan before querying.", ThoughtLevel: "work"}}},
		{PlanStep: 0, Payload: &baagentv1.Event_WorkPlan{WorkPlan: rev1}},
		{PlanStep: 0, Payload: &baagentv1.Event_StepEnd{StepEnd: &baagentv1.StepEndPayload{StepNumber: 1, Success: true, DurationMs: 30}}},
		{PlanStep: 1, Payload: &baagentv1.Event_PlanStepStart{PlanStepStart: &baagentv1.PlanStepStartPayload{
			StepNumber: 1, Description: rev1.Steps[0].Description, ExpectedOutput: rev1.Steps[0].ExpectedOutput, TotalSteps: 3, Revision: 1}}},
		{PlanStep: 1, Payload: &baagentv1.Event_StepStart{StepStart: &baagentv1.StepStartPayload{StepNumber: 2}}},
		{PlanStep: 1, Payload: &baagentv1.Event_Act{Act: &baagentv1.ActPayload{ToolCallId: "call_1", ToolName: "sql_query", RawArguments: `{"query":"SELECT 1"}`}}},
		{PlanStep: 1, Payload: &baagentv1.Event_Observe{Observe: &baagentv1.ObservePayload{ToolCallId: "call_1", ToolName: "sql_query", Observation: "| region |", Success: true}}},
		{PlanStep: 1, Payload: &baagentv1.Event_StepEnd{StepEnd: &baagentv1.StepEndPayload{StepNumber: 2, Success: true, DurationMs: 200}}},
		{PlanStep: 1, Payload: &baagentv1.Event_PlanStepEnd{PlanStepEnd: &baagentv1.PlanStepEndPayload{
			StepNumber: 1, Success: true, DurationMs: 412, Summary: first.Summary, Iterations: 2, Status: done, TotalSteps: 3}}},
		{PlanStep: 0, Payload: &baagentv1.Event_WorkPlan{WorkPlan: rev2}},
		{PlanStep: 2, Payload: &baagentv1.Event_PlanStepStart{PlanStepStart: &baagentv1.PlanStepStartPayload{
			StepNumber: 2, Description: rev2.Steps[1].Description, TotalSteps: 4, Revision: 2}}},
		{PlanStep: 2, Payload: &baagentv1.Event_PlanStepEnd{PlanStepEnd: &baagentv1.PlanStepEndPayload{
			StepNumber: 2, DurationMs: 950, Summary: "The segment column does not exist.", Iterations: 3,
			Status: baagentv1.PlanStepStatus_PLAN_STEP_STATUS_FAILED, TotalSteps: 4}}},
		{PlanStep: 3, Payload: &baagentv1.Event_PlanStepStart{PlanStepStart: &baagentv1.PlanStepStartPayload{
			StepNumber: 3, Description: rev2.Steps[2].Description, TotalSteps: 4, Revision: 2}}},
		{PlanStep: 3, Payload: &baagentv1.Event_PlanStepEnd{PlanStepEnd: &baagentv1.PlanStepEndPayload{
			StepNumber: 3, Success: true, DurationMs: 300, Summary: "Revenue per category.", Iterations: 1, Status: done, TotalSteps: 4}}},
		{PlanStep: 0, Payload: &baagentv1.Event_Warning{Warning: &baagentv1.WarningPayload{
			Code: "PLAN_OUT_OF_STEPS", Message: "The run reached its step limit; step 4 was skipped and the answer is written from steps 1-3."}}},
		{PlanStep: 4, Payload: &baagentv1.Event_PlanStepEnd{PlanStepEnd: &baagentv1.PlanStepEndPayload{
			StepNumber: 4, Summary: "the run reached its step limit", Status: baagentv1.PlanStepStatus_PLAN_STEP_STATUS_SKIPPED, TotalSteps: 4}}},
		{PlanStep: 0, Payload: &baagentv1.Event_Complete{Complete: &baagentv1.CompletePayload{Content: "Fixture report.", Format: "markdown"}}},
	}
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for i, ev := range evs {
		ev.RunId, ev.Tenant, ev.Seq = planFixtureRun, "default", uint64(i+1)
		ev.Cursor = "fixture-" + strconv.Itoa(i+1)
		ev.Ts = timestamppb.New(t0.Add(time.Duration(i) * 100 * time.Millisecond))
		ev.Type = payloadName(ev)
	}
	return evs
}

// payloadName is the name of the event's payload field, which is its type.
func payloadName(ev *baagentv1.Event) string {
	m := ev.ProtoReflect()
	f := m.WhichOneof(m.Descriptor().Oneofs().ByName("payload"))
	if f == nil {
		return ""
	}
	return string(f.Name())
}

// writePlanFixture writes the fixture as a JSON array of events in the
// gateway's SSE encoding (protojson with the proto field names) and
// returns its path.
func writePlanFixture(t *testing.T) string {
	t.Helper()
	b := []byte("[")
	for i, ev := range planFixture() {
		if i > 0 {
			b = append(b, ",\n"...)
		}
		j, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(ev)
		if err != nil {
			t.Fatalf("fixture event %d: %v", i+1, err)
		}
		b = append(b, j...)
	}
	b = append(b, "]\n"...)
	path := filepath.Join(t.TempDir(), "plan-events.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPlanFixtureIsWellFormed checks the fixture without a browser: seqs
// contiguous from 1, every payload named by its type, terminal last.
func TestPlanFixtureIsWellFormed(t *testing.T) {
	evs := planFixture()
	for i, ev := range evs {
		if ev.GetSeq() != uint64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.GetSeq())
		}
		j, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back baagentv1.Event
		if err := protojson.Unmarshal(j, &back); err != nil {
			t.Fatalf("seq %d does not round-trip: %v", ev.GetSeq(), err)
		}
		if ev.GetType() == "" || payloadName(&back) != ev.GetType() || back.GetType() != ev.GetType() {
			t.Errorf("seq %d: type %q, payload %q after a round trip", ev.GetSeq(), back.GetType(), payloadName(&back))
		}
	}
	if last := evs[len(evs)-1].GetType(); last != "complete" {
		t.Errorf("fixture ends with %s", last)
	}
}
