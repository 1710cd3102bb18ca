package patterntrace

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func run() Run {
	return Run{RunID: "run_1", ConversationID: "conv_1", Goal: "  Top 5 products by revenue in March  ", Started: t0, Ended: t0.Add(1500 * time.Millisecond)}
}

func ev(step int32, p any) *baagentv1.Event {
	e := &baagentv1.Event{PlanStep: step}
	switch v := p.(type) {
	case *baagentv1.StartPayload:
		e.Payload = &baagentv1.Event_Start{Start: v}
	case *baagentv1.ActPayload:
		e.Payload = &baagentv1.Event_Act{Act: v}
	case *baagentv1.ObservePayload:
		e.Payload = &baagentv1.Event_Observe{Observe: v}
	case *baagentv1.ClarificationQuestion:
		e.Payload = &baagentv1.Event_ClarificationAsked{ClarificationAsked: v}
	case *baagentv1.ClarificationAnsweredPayload:
		e.Payload = &baagentv1.Event_ClarificationAnswered{ClarificationAnswered: v}
	case *baagentv1.DecisionPoint:
		e.Payload = &baagentv1.Event_DecisionAsked{DecisionAsked: v}
	case *baagentv1.DecisionAnsweredPayload:
		e.Payload = &baagentv1.Event_DecisionAnswered{DecisionAnswered: v}
	case *baagentv1.PermissionRepliedPayload:
		e.Payload = &baagentv1.Event_PermissionReplied{PermissionReplied: v}
	case *baagentv1.DoomLoopDetectedPayload:
		e.Payload = &baagentv1.Event_DoomLoopDetected{DoomLoopDetected: v}
	case *baagentv1.DoomLoopIntervenedPayload:
		e.Payload = &baagentv1.Event_DoomLoopIntervened{DoomLoopIntervened: v}
	case *baagentv1.WorkPlan:
		e.Payload = &baagentv1.Event_WorkPlan{WorkPlan: v}
	case *baagentv1.PlanStepEndPayload:
		e.Payload = &baagentv1.Event_PlanStepEnd{PlanStepEnd: v}
	case *baagentv1.PatternMatchedPayload:
		e.Payload = &baagentv1.Event_PatternMatched{PatternMatched: v}
	case *baagentv1.CompletePayload:
		e.Payload = &baagentv1.Event_Complete{Complete: v}
	case *baagentv1.ErrorPayload:
		e.Payload = &baagentv1.Event_Error{Error: v}
	case *baagentv1.CancelledPayload:
		e.Payload = &baagentv1.Event_Cancelled{Cancelled: v}
	default:
		panic("unknown payload")
	}
	return e
}

func call(step int32, id, tool string, ok bool, obs string) []*baagentv1.Event {
	return []*baagentv1.Event{
		ev(step, &baagentv1.ActPayload{ToolCallId: id, ToolName: tool}),
		ev(step, &baagentv1.ObservePayload{ToolCallId: id, ToolName: tool, Success: ok, Observation: obs}),
	}
}

func cat(parts ...[]*baagentv1.Event) []*baagentv1.Event {
	var out []*baagentv1.Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(e *baagentv1.Event) []*baagentv1.Event { return []*baagentv1.Event{e} }

func TestGoalDurationResult(t *testing.T) {
	tr := Build(run(), cat(call(0, "c1", "sql_query", true, "rows"), one(ev(0, &baagentv1.CompletePayload{Content: strings.Repeat("é", 5000)}))))
	if tr.GetUserGoal() != "Top 5 products by revenue in March" || tr.GetRunId() != "run_1" || tr.GetConversationId() != "conv_1" {
		t.Fatalf("trace %v", tr)
	}
	if tr.GetDurationMs() != 1500 || !tr.GetSuccess() || len(tr.GetFinalResult()) > MaxResultBytes || !strings.HasSuffix(tr.GetFinalResult(), "…") {
		t.Fatalf("duration %d success %v result %d bytes", tr.GetDurationMs(), tr.GetSuccess(), len(tr.GetFinalResult()))
	}
	failed := Build(run(), one(ev(0, &baagentv1.ErrorPayload{Code: "X", Message: "boom"})))
	if failed.GetSuccess() || failed.GetFinalResult() != "" {
		t.Fatalf("failed run %v", failed)
	}
	cancelled := Build(run(), one(ev(0, &baagentv1.CancelledPayload{Reason: "x"})))
	if cancelled.GetSuccess() {
		t.Fatal("a cancelled run is a success")
	}
	// A negative duration (clock skew) is 0; an empty goal comes from start.
	r := run()
	r.Goal, r.Ended = "", t0.Add(-time.Second)
	tr = Build(r, one(ev(0, &baagentv1.StartPayload{Input: "from start"})))
	if tr.GetUserGoal() != "from start" || tr.GetDurationMs() != 0 {
		t.Fatalf("trace %v", tr)
	}
}

func TestClarifications(t *testing.T) {
	tr := Build(run(), cat(
		one(ev(0, &baagentv1.ClarificationQuestion{QuestionId: "q1", Question: "Which month?"})),
		one(ev(0, &baagentv1.ClarificationQuestion{QuestionId: "q2", Question: "Which year?"})),
		one(ev(0, &baagentv1.ClarificationAnsweredPayload{QuestionId: "q2", Answer: "2026", TimedOut: false})),
		one(ev(0, &baagentv1.ClarificationAnsweredPayload{QuestionId: "q1", Answer: "March", TimedOut: true})),
	))
	c := tr.GetClarifications()
	if len(c) != 2 || c[0].GetQuestion() != "Which month?" || c[0].GetAnswer() != "" || c[1].GetAnswer() != "2026" {
		t.Fatalf("clarifications %v", c)
	}
	if tr.GetHumanInterventions() != 1 {
		t.Fatalf("interventions %d, want 1 (a timeout is no answer)", tr.GetHumanInterventions())
	}
}

func TestDecisions(t *testing.T) {
	opts := []*baagentv1.DecisionOption{{Label: "North"}, {Label: "South", IsRecommended: true}}
	tr := Build(run(), cat(
		one(ev(0, &baagentv1.DecisionPoint{DecisionId: "q_s1_c0", DecisionType: baagentv1.DecisionType_DECISION_TYPE_BRANCH, Context: "Which region first?", Options: opts})),
		one(ev(0, &baagentv1.DecisionAnsweredPayload{DecisionId: "q_s1_c0", Answer: "North", SelectedOptions: []string{"North"}})),
		one(ev(0, &baagentv1.DecisionPoint{DecisionId: "q_s2_c0", DecisionType: baagentv1.DecisionType_DECISION_TYPE_RISK_ACCEPTANCE, Context: "Accept the risk?", Options: opts})),
		one(ev(0, &baagentv1.DecisionAnsweredPayload{DecisionId: "q_s2_c0", TimedOut: true})),
		one(ev(0, &baagentv1.DecisionPoint{DecisionId: "q_s3_c0", DecisionType: baagentv1.DecisionType_DECISION_TYPE_CONFIRMATION, Context: "Delete?"})),
		one(ev(0, &baagentv1.DecisionPoint{DecisionId: "plan_s1_c0", DecisionType: baagentv1.DecisionType_DECISION_TYPE_CUSTOM, Context: "Approve?"})),
		one(ev(0, &baagentv1.DoomLoopDetectedPayload{DecisionId: "doom_s4_c0", ToolName: "sql_query", RepeatCount: 3})),
		one(ev(0, &baagentv1.DecisionPoint{DecisionId: "doom_s4_c0", DecisionType: baagentv1.DecisionType_DECISION_TYPE_CUSTOM, Context: "Stuck?"})),
	))
	d := tr.GetDecisions()
	if len(d) != 5 {
		t.Fatalf("decisions %v", d)
	}
	if d[0].GetQuestion() != "Which region first?" || strings.Join(d[0].GetOptions(), "|") != "North|South" || d[0].GetRecommended() != "South" || d[0].GetUserChoice() != "North" || d[0].GetImpact() != ImpactMedium {
		t.Errorf("branch decision %v", d[0])
	}
	if d[1].GetImpact() != ImpactHigh || d[1].GetUserChoice() != "" {
		t.Errorf("risk decision %v", d[1])
	}
	for i, want := range []string{ImpactHigh, ImpactHigh, ImpactHigh} {
		if d[i+2].GetImpact() != want {
			t.Errorf("decision %d impact %q, want %q", i+2, d[i+2].GetImpact(), want)
		}
	}
	if tr.GetHumanInterventions() != 1 {
		t.Errorf("interventions %d", tr.GetHumanInterventions())
	}
}

func TestPlanSteps(t *testing.T) {
	plan := func(rev int32, descs ...string) *baagentv1.Event {
		wp := &baagentv1.WorkPlan{Revision: rev}
		for i, d := range descs {
			wp.Steps = append(wp.Steps, &baagentv1.PlanStep{StepNumber: int32(i + 1), Description: d, ExpectedOutput: "out " + d})
		}
		return ev(0, wp)
	}
	tr := Build(run(), cat(
		one(plan(1, "old")),
		one(plan(2, "Find the month", "Rank the products", "Write it up")),
		call(1, "c1", "sql_query", true, ""),
		call(1, "c2", "sql_query", true, ""),
		call(1, "c3", "file_read", false, "no"),
		one(ev(1, &baagentv1.PlanStepEndPayload{StepNumber: 1, Status: baagentv1.PlanStepStatus_PLAN_STEP_STATUS_COMPLETED})),
		call(2, "c4", "python", true, ""),
		one(ev(2, &baagentv1.PlanStepEndPayload{StepNumber: 2, Status: baagentv1.PlanStepStatus_PLAN_STEP_STATUS_FAILED})),
	))
	s := tr.GetPlanSteps()
	if len(s) != 3 || s[0].GetDescription() != "Find the month" || s[0].GetExpectedOutput() != "out Find the month" {
		t.Fatalf("plan steps %v", s)
	}
	if !s[0].GetDone() || s[1].GetDone() || s[2].GetDone() {
		t.Errorf("done: %v %v %v", s[0].GetDone(), s[1].GetDone(), s[2].GetDone())
	}
	if strings.Join(s[0].GetTools(), ",") != "sql_query" || strings.Join(s[1].GetTools(), ",") != "python" || len(s[2].GetTools()) != 0 {
		t.Errorf("tools %v / %v / %v", s[0].GetTools(), s[1].GetTools(), s[2].GetTools())
	}
}

func TestToolCalls(t *testing.T) {
	sub := ev(0, &baagentv1.ActPayload{ToolCallId: "x", ToolName: "sql_query"})
	sub.SubagentRunId = "child"
	tr := Build(run(), cat(
		call(0, "a", "ask_clarification", true, ""),
		call(0, "p", "plan", true, ""),
		call(0, "u", "update_plan", true, ""),
		call(0, "d", "ask_decision", true, ""),
		one(sub),
		one(ev(0, &baagentv1.ActPayload{ToolCallId: "in", ToolName: "file_read", ParentToolCallId: "comp"})),
		one(ev(1, &baagentv1.ActPayload{ToolCallId: "c1", ToolName: "sql_query"})),
		one(ev(1, &baagentv1.ActPayload{ToolCallId: "c2", ToolName: "python"})),
		one(ev(1, &baagentv1.ObservePayload{ToolCallId: "c2", ToolName: "python", Success: true})),
		one(ev(1, &baagentv1.ObservePayload{ToolCallId: "c1", ToolName: "sql_query", Success: false})),
		one(ev(2, &baagentv1.ObservePayload{ToolCallId: "lone", ToolName: "glob", Success: true})),
	))
	got := tr.GetToolCalls()
	want := []*baagentv1.TraceToolCall{{Tool: "sql_query", PlanStep: 1}, {Tool: "python", Success: true, PlanStep: 1}, {Tool: "glob", Success: true, PlanStep: 2}}
	if len(got) != len(want) {
		t.Fatalf("tool calls %v", got)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("call %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func TestCorrectionPlanEdit(t *testing.T) {
	wp := &baagentv1.WorkPlan{Steps: []*baagentv1.PlanStep{{StepNumber: 1, Description: "Query all years"}, {StepNumber: 2, Description: "Rank"}}}
	tr := Build(run(), cat(
		one(ev(0, wp)),
		one(ev(0, &baagentv1.DecisionPoint{DecisionId: "plan_s1_c0", DecisionType: baagentv1.DecisionType_DECISION_TYPE_CUSTOM, Context: "Approve?"})),
		one(ev(0, &baagentv1.DecisionAnsweredPayload{DecisionId: "plan_s1_c0", Answer: "Only March 2026", SelectedOptions: []string{"Only March 2026"}})),
		one(ev(0, &baagentv1.DecisionPoint{DecisionId: "plan_s2_c0", DecisionType: baagentv1.DecisionType_DECISION_TYPE_CUSTOM, Context: "Approve?"})),
		one(ev(0, &baagentv1.DecisionAnsweredPayload{DecisionId: "plan_s2_c0", Answer: "approve", SelectedOptions: []string{"approve"}})),
		one(ev(0, &baagentv1.DecisionPoint{DecisionId: "plan_s3_c0", DecisionType: baagentv1.DecisionType_DECISION_TYPE_CUSTOM, Context: "Approve?"})),
		one(ev(0, &baagentv1.DecisionAnsweredPayload{DecisionId: "plan_s3_c0", Answer: "edit", SelectedOptions: []string{"edit"}})),
	))
	c := tr.GetCorrections()
	if len(c) != 1 || c[0].GetAgentError() != "1. Query all years\n2. Rank" || c[0].GetHumanFix() != "Only March 2026" || c[0].GetPlanStep() != 0 {
		t.Fatalf("corrections %v", c)
	}
	// Three answers and one plan edit.
	if tr.GetHumanInterventions() != 4 {
		t.Errorf("interventions %d, want 4", tr.GetHumanInterventions())
	}
}

func TestCorrectionDoomLoop(t *testing.T) {
	tr := Build(run(), cat(
		one(ev(2, &baagentv1.DoomLoopDetectedPayload{DecisionId: "doom_s4_c0", ToolName: "sql_query", RepeatCount: 3})),
		one(ev(2, &baagentv1.DecisionPoint{DecisionId: "doom_s4_c0", Context: "Stuck?"})),
		one(ev(2, &baagentv1.DecisionAnsweredPayload{DecisionId: "doom_s4_c0", Answer: "correct"})),
		one(ev(2, &baagentv1.DoomLoopIntervenedPayload{DecisionId: "doom_s4_c0", Choice: "correct", ToolName: "sql_query"})),
		one(ev(2, &baagentv1.DoomLoopIntervenedPayload{DecisionId: "doom_s5_c0", Choice: "stop", TimedOut: true})),
	))
	c := tr.GetCorrections()
	if len(c) != 1 || c[0].GetPlanStep() != 2 || c[0].GetAgentError() != "called sql_query with the same arguments 3 times" || c[0].GetHumanFix() != "correct" {
		t.Fatalf("corrections %v", c)
	}
	if tr.GetHumanInterventions() != 1 {
		t.Errorf("interventions %d", tr.GetHumanInterventions())
	}
}

func TestCorrectionAfterFailedCall(t *testing.T) {
	tr := Build(run(), cat(
		call(1, "c1", "sql_query", false, "no such column: revenue"),
		one(ev(1, &baagentv1.ClarificationQuestion{QuestionId: "q1", Question: "How is revenue computed?"})),
		one(ev(1, &baagentv1.ClarificationAnsweredPayload{QuestionId: "q1", Answer: "quantity * unit_price"})),
		call(1, "c2", "sql_query", true, ""),
		call(1, "c3", "python", true, ""),
		call(1, "c4", "sql_query", true, ""),
		call(2, "c5", "chart", true, ""),
		// A failure in step 2 answered in step 3 is no correction.
		call(2, "c6", "sql_query", false, "x"),
		one(ev(3, &baagentv1.ClarificationAnsweredPayload{QuestionId: "q9", Answer: "y"})),
	))
	c := tr.GetCorrections()
	if len(c) != 1 {
		t.Fatalf("corrections %v", c)
	}
	if c[0].GetPlanStep() != 1 || c[0].GetAgentError() != "sql_query: no such column: revenue" || c[0].GetHumanFix() != "quantity * unit_price" || strings.Join(c[0].GetTools(), ",") != "sql_query,python" {
		t.Errorf("correction %v", c[0])
	}
	// A decision answered after a failure corrects too.
	tr = Build(run(), cat(
		call(0, "c1", "sql_query", false, "boom"),
		one(ev(0, &baagentv1.DecisionPoint{DecisionId: "q_s2_c0", Context: "Which table?", Options: []*baagentv1.DecisionOption{{Label: "orders"}}})),
		one(ev(0, &baagentv1.DecisionAnsweredPayload{DecisionId: "q_s2_c0", Answer: "orders", SelectedOptions: []string{"orders"}})),
	))
	if c := tr.GetCorrections(); len(c) != 1 || c[0].GetHumanFix() != "orders" {
		t.Errorf("corrections %v", c)
	}
}

func TestPatternUse(t *testing.T) {
	reuse := func(answer string, timedOut bool) *baagentv1.InteractionTrace {
		return Build(run(), cat(
			one(ev(0, &baagentv1.PatternMatchedPayload{PatternId: "pt_1", Mode: ModeReuse, DecisionId: "pattern_s0"})),
			one(ev(0, &baagentv1.DecisionPoint{DecisionId: "pattern_s0", DecisionType: baagentv1.DecisionType_DECISION_TYPE_METHOD, Context: "Reuse it?"})),
			one(ev(0, &baagentv1.DecisionAnsweredPayload{DecisionId: "pattern_s0", Answer: answer, SelectedOptions: []string{answer}, TimedOut: timedOut})),
		))
	}
	if tr := reuse(ReuseLabel, false); tr.GetPatternId() != "pt_1" || tr.GetPatternMode() != ModeReuse || len(tr.GetDecisions()) != 0 || tr.GetHumanInterventions() != 0 {
		t.Errorf("accepted: %v", tr)
	}
	if tr := reuse(FromScratchLabel, false); tr.GetPatternId() != "pt_1" || tr.GetPatternMode() != "" {
		t.Errorf("declined: %v", tr)
	}
	if tr := reuse(ReuseLabel, true); tr.GetPatternId() != "pt_1" || tr.GetPatternMode() != "" {
		t.Errorf("timed out: %v", tr)
	}
	ref := Build(run(), one(ev(0, &baagentv1.PatternMatchedPayload{PatternId: "pt_2", Mode: ModeReference})))
	if ref.GetPatternId() != "pt_2" || ref.GetPatternMode() != ModeReference {
		t.Errorf("reference: %v", ref)
	}
}

func TestPermissionsCount(t *testing.T) {
	tr := Build(run(), cat(
		one(ev(0, &baagentv1.PermissionRepliedPayload{Reply: "allow"})),
		one(ev(0, &baagentv1.PermissionRepliedPayload{Reply: "deny", TimedOut: true})),
	))
	if tr.GetHumanInterventions() != 1 {
		t.Errorf("interventions %d", tr.GetHumanInterventions())
	}
}

func TestBounds(t *testing.T) {
	var evs []*baagentv1.Event
	big := strings.Repeat("x", 10_000)
	for i := range 500 {
		id := itoa(int64(i))
		evs = append(evs, call(int32(i%30), "c"+id, "tool"+id, i%2 == 0, big)...)
		evs = append(evs,
			ev(0, &baagentv1.ClarificationQuestion{QuestionId: "q" + id, Question: big}),
			ev(int32(i%30), &baagentv1.ClarificationAnsweredPayload{QuestionId: "q" + id, Answer: big}),
			ev(0, &baagentv1.DecisionPoint{DecisionId: "d" + id, Context: big, Options: []*baagentv1.DecisionOption{{Label: big}, {Label: "a"}, {Label: "b"}, {Label: "c"}, {Label: "d"}, {Label: "e"}, {Label: "f"}, {Label: "g"}, {Label: "h"}, {Label: "i"}, {Label: "j"}}}),
		)
	}
	wp := &baagentv1.WorkPlan{}
	for i := range 40 {
		wp.Steps = append(wp.Steps, &baagentv1.PlanStep{StepNumber: int32(i + 1), Description: big})
	}
	evs = append(evs, ev(0, wp))
	tr := Build(Run{Goal: strings.Repeat("g", 100_000)}, evs)
	checkBounds(t, tr)
	if len(tr.GetToolCalls()) != MaxToolCalls || len(tr.GetClarifications()) != MaxItems || len(tr.GetDecisions()) != MaxItems || len(tr.GetPlanSteps()) != MaxPlanSteps || len(tr.GetCorrections()) != MaxItems {
		t.Errorf("sizes: %d calls, %d clarifications, %d decisions, %d steps, %d corrections", len(tr.GetToolCalls()), len(tr.GetClarifications()), len(tr.GetDecisions()), len(tr.GetPlanSteps()), len(tr.GetCorrections()))
	}
}

// checkBounds fails unless tr is within every bound and marshals.
func checkBounds(t *testing.T, tr *baagentv1.InteractionTrace) {
	t.Helper()
	if _, err := proto.Marshal(tr); err != nil {
		t.Fatalf("trace does not marshal: %v", err)
	}
	text := func(s string, n int) {
		if len(s) > n {
			t.Fatalf("text of %d bytes > %d", len(s), n)
		}
	}
	text(tr.GetUserGoal(), MaxGoalBytes)
	text(tr.GetFinalResult(), MaxResultBytes)
	if len(tr.GetToolCalls()) > MaxToolCalls || len(tr.GetClarifications()) > MaxItems || len(tr.GetDecisions()) > MaxItems ||
		len(tr.GetCorrections()) > MaxItems || len(tr.GetPlanSteps()) > MaxPlanSteps || tr.GetDurationMs() < 0 || tr.GetHumanInterventions() < 0 {
		t.Fatalf("trace out of bounds: %d calls, %d clarifications, %d decisions, %d corrections, %d steps", len(tr.GetToolCalls()), len(tr.GetClarifications()), len(tr.GetDecisions()), len(tr.GetCorrections()), len(tr.GetPlanSteps()))
	}
	for _, c := range tr.GetClarifications() {
		text(c.GetQuestion(), MaxTextBytes)
		text(c.GetAnswer(), MaxTextBytes)
	}
	for _, d := range tr.GetDecisions() {
		text(d.GetQuestion(), MaxTextBytes)
		text(d.GetUserChoice(), MaxTextBytes)
		if len(d.GetOptions()) > MaxOptions {
			t.Fatalf("%d options", len(d.GetOptions()))
		}
		for _, o := range d.GetOptions() {
			text(o, MaxNameBytes)
		}
	}
	for _, c := range tr.GetCorrections() {
		text(c.GetAgentError(), MaxTextBytes)
		text(c.GetHumanFix(), MaxTextBytes)
		if len(c.GetTools()) > MaxStepTools {
			t.Fatalf("%d correction tools", len(c.GetTools()))
		}
	}
	for _, s := range tr.GetPlanSteps() {
		text(s.GetDescription(), MaxTextBytes)
		text(s.GetExpectedOutput(), MaxTextBytes)
		if len(s.GetTools()) > MaxStepTools {
			t.Fatalf("%d step tools", len(s.GetTools()))
		}
	}
	for _, c := range tr.GetToolCalls() {
		text(c.GetTool(), MaxNameBytes)
	}
}

// FuzzBuild: any sequence of events (drawn from the fuzzer's bytes) builds
// a trace within bounds, without panicking.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, "sql_query", "plan_s1_c0", "text")
	f.Add([]byte{13, 3, 4, 1, 2, 15}, "pattern_s0", "Reuse", "\xff\xfe")
	f.Fuzz(func(t *testing.T, ops []byte, a, b, c string) {
		if len(ops) > 4096 {
			ops = ops[:4096]
		}
		strs := []string{a, b, c, "Reuse", "plan_s1_c0", "doom_s1_c0", "pattern_s0", "sql_query", ""}
		s := func(i int) string { return strs[i%len(strs)] }
		bld := New(Run{RunID: a, Goal: b, Started: t0, Ended: t0.Add(time.Duration(len(c)) * time.Second)})
		for i, op := range ops {
			step := int32(op>>4) - 2
			x, y := s(i), s(i+int(op))
			var p any
			switch op % 16 {
			case 0:
				p = &baagentv1.StartPayload{Input: x}
			case 1:
				p = &baagentv1.ActPayload{ToolCallId: y, ToolName: x}
			case 2:
				p = &baagentv1.ObservePayload{ToolCallId: y, ToolName: x, Success: op&32 != 0, Observation: c}
			case 3:
				p = &baagentv1.ClarificationQuestion{QuestionId: y, Question: x}
			case 4:
				p = &baagentv1.ClarificationAnsweredPayload{QuestionId: y, Answer: x, TimedOut: op&64 != 0}
			case 5:
				p = &baagentv1.DecisionPoint{DecisionId: y, Context: x, DecisionType: baagentv1.DecisionType(op % 7), Options: []*baagentv1.DecisionOption{{Label: x, IsRecommended: true}, {Label: y}}}
			case 6:
				p = &baagentv1.DecisionAnsweredPayload{DecisionId: y, Answer: x, SelectedOptions: []string{x, y}, TimedOut: op&64 != 0}
			case 7:
				p = &baagentv1.PermissionRepliedPayload{Reply: x, TimedOut: op&64 != 0}
			case 8:
				p = &baagentv1.DoomLoopDetectedPayload{DecisionId: y, ToolName: x, RepeatCount: int32(op)}
			case 9:
				p = &baagentv1.DoomLoopIntervenedPayload{DecisionId: y, Choice: x, TimedOut: op&64 != 0}
			case 10:
				wp := &baagentv1.WorkPlan{}
				for j := range int(op) % 30 {
					wp.Steps = append(wp.Steps, &baagentv1.PlanStep{StepNumber: int32(j) - 1, Description: x, Status: baagentv1.PlanStepStatus(j % 6)})
				}
				p = wp
			case 11:
				p = &baagentv1.PlanStepEndPayload{StepNumber: step, Status: baagentv1.PlanStepStatus(op % 6)}
			case 12:
				p = &baagentv1.PatternMatchedPayload{PatternId: x, Mode: []string{ModeReuse, ModeReference, x}[op%3], DecisionId: y}
			case 13:
				p = &baagentv1.CompletePayload{Content: c}
			case 14:
				p = &baagentv1.ErrorPayload{Message: x}
			default:
				p = &baagentv1.CancelledPayload{Reason: x}
			}
			e := ev(step, p)
			if op == 255 {
				e.SubagentRunId = x
			}
			bld.Add(e)
		}
		bld.Add(nil)
		checkBounds(t, bld.Trace())
	})
}
