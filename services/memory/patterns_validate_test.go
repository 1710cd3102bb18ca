package memory

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/patterns"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/memory/store"
)

func str(v string) *string { return &v }

// TestPatternValidation checks that every pattern RPC refuses bad input
// with InvalidArgument naming the field, before touching the store.
func TestPatternValidation(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{}, false)
	c := ts.c
	id := newID(patternPrefix, ts.srv.now())
	match := &baagentv1.MatchPatternsRequest{Tenant: "acme", Goal: "Report revenue by region"}
	record := &baagentv1.RecordTraceRequest{Tenant: "acme", Trace: &baagentv1.InteractionTrace{RunId: "run-1", UserGoal: "Report revenue"}}
	update := &baagentv1.UpdatePatternRequest{Tenant: "acme", Id: id, Edit: &baagentv1.PatternEdit{Name: str("Revenue report")}}
	steps := func(n int) []*baagentv1.PatternStep {
		out := make([]*baagentv1.PatternStep, n)
		for i := range out {
			out[i] = &baagentv1.PatternStep{Description: "step"}
		}
		return out
	}
	cases := []vt.Case{
		{Name: "MatchPatterns/no tenant", Call: vt.Call(c.MatchPatterns, vt.With(match, func(r *baagentv1.MatchPatternsRequest) { r.Tenant = "" })), Field: "tenant"},
		{Name: "MatchPatterns/no goal", Call: vt.Call(c.MatchPatterns, vt.With(match, func(r *baagentv1.MatchPatternsRequest) { r.Goal = " " })), Field: "goal"},
		{Name: "MatchPatterns/goal too long", Call: vt.Call(c.MatchPatterns, vt.With(match, func(r *baagentv1.MatchPatternsRequest) { r.Goal = strings.Repeat("g", MaxGoalBytes+1) })), Field: "goal"},
		{Name: "MatchPatterns/NUL in goal", Call: vt.Call(c.MatchPatterns, vt.With(match, func(r *baagentv1.MatchPatternsRequest) { r.Goal = "a\x00b" })), Field: "goal"},
		{Name: "MatchPatterns/bad conversation", Call: vt.Call(c.MatchPatterns, vt.With(match, func(r *baagentv1.MatchPatternsRequest) { r.ConversationId = "a/b" })), Field: "conversation_id"},

		{Name: "RecordTrace/no tenant", Call: vt.Call(c.RecordTrace, vt.With(record, func(r *baagentv1.RecordTraceRequest) { r.Tenant = "" })), Field: "tenant"},
		{Name: "RecordTrace/no trace", Call: vt.Call(c.RecordTrace, vt.With(record, func(r *baagentv1.RecordTraceRequest) { r.Trace = nil })), Field: "trace"},
		{Name: "RecordTrace/no run", Call: vt.Call(c.RecordTrace, vt.With(record, func(r *baagentv1.RecordTraceRequest) { r.Trace.RunId = "" })), Field: "trace.run_id"},
		{Name: "RecordTrace/bad run", Call: vt.Call(c.RecordTrace, vt.With(record, func(r *baagentv1.RecordTraceRequest) { r.Trace.RunId = "run.1" })), Field: "trace.run_id"},
		{Name: "RecordTrace/no goal", Call: vt.Call(c.RecordTrace, vt.With(record, func(r *baagentv1.RecordTraceRequest) { r.Trace.UserGoal = " \x00 " })), Field: "trace.user_goal"},
		{Name: "RecordTrace/bad conversation", Call: vt.Call(c.RecordTrace, vt.With(record, func(r *baagentv1.RecordTraceRequest) { r.Trace.ConversationId = ".x" })), Field: "trace.conversation_id"},
		{Name: "RecordTrace/bad pattern", Call: vt.Call(c.RecordTrace, vt.With(record, func(r *baagentv1.RecordTraceRequest) {
			r.Trace.PatternId, r.Trace.PatternMode = "en_x", "reuse"
		})), Field: "trace.pattern_id"},
		{Name: "RecordTrace/bad mode", Call: vt.Call(c.RecordTrace, vt.With(record, func(r *baagentv1.RecordTraceRequest) {
			r.Trace.PatternId, r.Trace.PatternMode = id, "always"
		})), Field: "trace.pattern_mode"},
		{Name: "RecordTrace/mode without pattern", Call: vt.Call(c.RecordTrace, vt.With(record, func(r *baagentv1.RecordTraceRequest) { r.Trace.PatternMode = "reference" })), Field: "trace.pattern_id"},

		{Name: "ListPatterns/no tenant", Call: vt.Call(c.ListPatterns, &baagentv1.ListPatternsRequest{}), Field: "tenant"},
		{Name: "ListPatterns/page size", Call: vt.Call(c.ListPatterns, &baagentv1.ListPatternsRequest{Tenant: "acme", PageSize: MaxPageSize + 1}), Field: "page_size"},
		{Name: "ListPatterns/negative page size", Call: vt.Call(c.ListPatterns, &baagentv1.ListPatternsRequest{Tenant: "acme", PageSize: -1}), Field: "page_size"},
		{Name: "ListPatterns/page token", Call: vt.Call(c.ListPatterns, &baagentv1.ListPatternsRequest{Tenant: "acme", PageToken: "a b"}), Field: "page_token"},
		{Name: "ListPatterns/foreign page token", Call: vt.Call(c.ListPatterns, &baagentv1.ListPatternsRequest{Tenant: "acme", PageToken: "abc"}), Field: "page_token"},
		{Name: "ListPatterns/state", Call: vt.Call(c.ListPatterns, &baagentv1.ListPatternsRequest{Tenant: "acme", State: 9}), Field: "state"},
		{Name: "ListPatterns/task type", Call: vt.Call(c.ListPatterns, &baagentv1.ListPatternsRequest{Tenant: "acme", TaskType: strings.Repeat("t", 65)}), Field: "task_type"},

		{Name: "GetPattern/no tenant", Call: vt.Call(c.GetPattern, &baagentv1.GetPatternRequest{Id: id}), Field: "tenant"},
		{Name: "GetPattern/no id", Call: vt.Call(c.GetPattern, &baagentv1.GetPatternRequest{Tenant: "acme"}), Field: "id"},
		{Name: "GetPattern/entity id", Call: vt.Call(c.GetPattern, &baagentv1.GetPatternRequest{Tenant: "acme", Id: newID(entityPrefix, time.Now())}), Field: "id"},
		{Name: "GetPattern/short id", Call: vt.Call(c.GetPattern, &baagentv1.GetPatternRequest{Tenant: "acme", Id: id[:10]}), Field: "id"},

		{Name: "UpdatePattern/no tenant", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) { r.Tenant = "" })), Field: "tenant"},
		{Name: "UpdatePattern/bad id", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) { r.Id = "pt_1" })), Field: "id"},
		{Name: "UpdatePattern/no edit", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) { r.Edit = nil })), Field: "edit"},
		{Name: "UpdatePattern/empty edit", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) { r.Edit = &baagentv1.PatternEdit{} })), Field: "edit"},
		{Name: "UpdatePattern/negative version", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) { r.ExpectedVersion = -1 })), Field: "expected_version"},
		{Name: "UpdatePattern/blank name", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) { r.Edit.Name = str("  ") })), Field: "edit.name"},
		{Name: "UpdatePattern/long name", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) { r.Edit.Name = str(strings.Repeat("n", 121)) })), Field: "edit.name"},
		{Name: "UpdatePattern/long description", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) {
			r.Edit.Description = str(strings.Repeat("d", MaxPatternDescriptionBytes+1))
		})), Field: "edit.description"},
		{Name: "UpdatePattern/empty steps", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) { r.Edit.ReplaceSteps = true })), Field: "edit.steps"},
		{Name: "UpdatePattern/too many steps", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) {
			r.Edit.ReplaceSteps, r.Edit.Steps = true, steps(patterns.MaxSteps+1)
		})), Field: "edit.steps"},
		{Name: "UpdatePattern/steps without replace", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) { r.Edit.Steps = steps(1) })), Field: "edit.replace_steps"},
		{Name: "UpdatePattern/step without description", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) {
			r.Edit.ReplaceSteps, r.Edit.Steps = true, []*baagentv1.PatternStep{{Tools: []string{"sql"}}}
		})), Field: "edit.steps[0].description"},
		{Name: "UpdatePattern/step tool", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) {
			r.Edit.ReplaceSteps, r.Edit.Steps = true, []*baagentv1.PatternStep{{Description: "d", Tools: []string{"ok", ""}}}
		})), Field: "edit.steps[0].tools[1]"},
		{Name: "UpdatePattern/too many corrections", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) {
			r.Edit.ReplaceSteps, r.Edit.Steps = true, []*baagentv1.PatternStep{{Description: "d", Corrections: []string{"a", "b", "c", "d", "e", "f"}}}
		})), Field: "edit.steps[0].corrections"},
		{Name: "UpdatePattern/empty tool chain", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) { r.Edit.ToolChain = &baagentv1.ToolChain{} })), Field: "edit.tool_chain.tools"},
		{Name: "UpdatePattern/long tool chain", Call: vt.Call(c.UpdatePattern, vt.With(update, func(r *baagentv1.UpdatePatternRequest) {
			r.Edit.ToolChain = &baagentv1.ToolChain{Tools: make([]string, patterns.MaxToolChainLength+1)}
		})), Field: "edit.tool_chain.tools"},

		{Name: "DeletePattern/no id", Call: vt.Call(c.DeletePattern, &baagentv1.DeletePatternRequest{Tenant: "acme"}), Field: "id"},
		{Name: "DeletePattern/no tenant", Call: vt.Call(c.DeletePattern, &baagentv1.DeletePatternRequest{Id: id}), Field: "tenant"},
		{Name: "MarkPatternUseless/bad id", Call: vt.Call(c.MarkPatternUseless, &baagentv1.MarkPatternUselessRequest{Tenant: "acme", Id: "x"}), Field: "id"},
		{Name: "MarkPatternUseless/long reason", Call: vt.Call(c.MarkPatternUseless, &baagentv1.MarkPatternUselessRequest{
			Tenant: "acme", Id: id, Reason: strings.Repeat("r", MaxReasonBytes+1),
		}), Field: "reason"},
		{Name: "GrantPattern/no grantee", Call: vt.Call(c.GrantPattern, &baagentv1.GrantPatternRequest{Tenant: "acme", Id: id}), Field: "grantee_tenant"},
		{Name: "GrantPattern/to itself", Call: vt.Call(c.GrantPattern, &baagentv1.GrantPatternRequest{Tenant: "acme", Id: id, GranteeTenant: "acme"}), Field: "grantee_tenant"},
		{Name: "GrantPattern/bad grantee", Call: vt.Call(c.GrantPattern, &baagentv1.GrantPatternRequest{Tenant: "acme", Id: id, GranteeTenant: "a.b"}), Field: "grantee_tenant"},
		{Name: "GrantPattern/bad id", Call: vt.Call(c.GrantPattern, &baagentv1.GrantPatternRequest{Tenant: "acme", Id: "pt_", GranteeTenant: "beta"}), Field: "id"},
		{Name: "RevokePatternGrant/no grantee", Call: vt.Call(c.RevokePatternGrant, &baagentv1.RevokePatternGrantRequest{Tenant: "acme", Id: id}), Field: "grantee_tenant"},
		{Name: "RevokePatternGrant/no tenant", Call: vt.Call(c.RevokePatternGrant, &baagentv1.RevokePatternGrantRequest{Id: id, GranteeTenant: "beta"}), Field: "tenant"},
		{Name: "ListPatternGrants/no tenant", Call: vt.Call(c.ListPatternGrants, &baagentv1.ListPatternGrantsRequest{}), Field: "tenant"},
		{Name: "ListPatternGrants/bad id", Call: vt.Call(c.ListPatternGrants, &baagentv1.ListPatternGrantsRequest{Tenant: "acme", Id: "pt_x"}), Field: "id"},

		{Name: "UpdateMemorySettings/conversation patterns without conversation", Call: vt.Call(c.UpdateMemorySettings,
			&baagentv1.UpdateMemorySettingsRequest{Tenant: "acme", ConversationPatterns: yes(false)}), Field: "conversation_id"},
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			vt.WantInvalid(t, tc.Call(t.Context()), tc.Field)
		})
	}
}

// TestTraceFromProtoCutsRatherThanRefuses: an oversized trace is cut to
// its bounds, text on a rune boundary without NUL, references clamped.
func TestTraceFromProtoCutsRatherThanRefuses(t *testing.T) {
	in := &baagentv1.InteractionTrace{
		RunId: "run-1", UserGoal: strings.Repeat("é", MaxGoalBytes), FinalResult: "ok\x00done",
		DurationMs: -5, HumanInterventions: -1,
	}
	for range MaxTraceToolCalls + 10 {
		in.ToolCalls = append(in.ToolCalls, &baagentv1.TraceToolCall{Tool: " sql ", Success: true, PlanStep: -3})
	}
	for range MaxTraceCorrections + 1 {
		in.Corrections = append(in.Corrections, &baagentv1.TraceCorrection{PlanStep: 1 << 30, HumanFix: "fix", Tools: make([]string, 50)})
	}
	for range MaxTracePlanSteps + 1 {
		in.PlanSteps = append(in.PlanSteps, &baagentv1.TracePlanStep{Description: strings.Repeat("x", 10_000), Done: true})
	}
	for range MaxTraceDecisions + 1 {
		in.Decisions = append(in.Decisions, &baagentv1.TraceDecision{Question: "q", Impact: " HIGH ", Options: make([]string, 40)})
	}
	for range MaxTraceClarifications + 1 {
		in.Clarifications = append(in.Clarifications, &baagentv1.TraceClarification{Question: "q", Answer: "a"})
	}
	tr := traceFromProto(in)
	switch {
	case len(tr.UserGoal) > MaxGoalBytes || !utf8.ValidString(tr.UserGoal):
		t.Fatalf("goal %d bytes, valid %v", len(tr.UserGoal), utf8.ValidString(tr.UserGoal))
	case tr.FinalResult != "okdone":
		t.Fatalf("result %q", tr.FinalResult)
	case tr.DurationMs != 0 || tr.HumanInterventions != 0:
		t.Fatalf("duration %d interventions %d", tr.DurationMs, tr.HumanInterventions)
	case len(tr.ToolCalls) != MaxTraceToolCalls || tr.ToolCalls[0].Tool != "sql" || tr.ToolCalls[0].PlanStep != 0:
		t.Fatalf("%d tool calls, first %+v", len(tr.ToolCalls), tr.ToolCalls[0])
	case len(tr.Corrections) != MaxTraceCorrections || tr.Corrections[0].PlanStep != 0 || len(tr.Corrections[0].Tools) != 0:
		t.Fatalf("corrections %d, first %+v", len(tr.Corrections), tr.Corrections[0])
	case len(tr.PlanSteps) != MaxTracePlanSteps || len(tr.PlanSteps[0].Description) != MaxTraceTextBytes:
		t.Fatalf("plan steps %d, description %d bytes", len(tr.PlanSteps), len(tr.PlanSteps[0].Description))
	case len(tr.Decisions) != MaxTraceDecisions || tr.Decisions[0].Impact != "high" || len(tr.Decisions[0].Options) != MaxTraceOptions:
		t.Fatalf("decisions %d, first %+v", len(tr.Decisions), tr.Decisions[0])
	case len(tr.Clarifications) != MaxTraceClarifications:
		t.Fatalf("clarifications %d", len(tr.Clarifications))
	}
}

func TestScrubTraceCoversEveryTextField(t *testing.T) {
	const email = "jane.doe@example.com"
	tr := patterns.Trace{
		UserGoal: "Report for " + email, FinalResult: email,
		Clarifications: []patterns.ClarificationQA{{Question: email, Answer: email}},
		Decisions:      []patterns.Decision{{Question: email, Options: []string{email}, Recommended: email, UserChoice: email}},
		PlanSteps:      []patterns.PlanStep{{Description: email, ExpectedOutput: email}},
		Corrections:    []patterns.Correction{{AgentError: email, HumanFix: email}},
	}
	if n := scrubTrace(&tr); n != 12 {
		t.Errorf("%d redactions, want 12", n)
	}
	b, err := proto.Marshal(tracePB(&tr))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "jane") {
		t.Fatalf("scrubbed trace still holds the address: %+v", tr)
	}
}

// tracePB is a test's view of a core trace as proto, for searching it.
func tracePB(tr *patterns.Trace) *baagentv1.InteractionTrace {
	out := &baagentv1.InteractionTrace{UserGoal: tr.UserGoal, FinalResult: tr.FinalResult}
	for _, c := range tr.Clarifications {
		out.Clarifications = append(out.Clarifications, &baagentv1.TraceClarification{Question: c.Question, Answer: c.Answer})
	}
	for _, d := range tr.Decisions {
		out.Decisions = append(out.Decisions, &baagentv1.TraceDecision{Question: d.Question, Options: d.Options, Recommended: d.Recommended, UserChoice: d.UserChoice})
	}
	for _, s := range tr.PlanSteps {
		out.PlanSteps = append(out.PlanSteps, &baagentv1.TracePlanStep{Description: s.Description, ExpectedOutput: s.ExpectedOutput})
	}
	for _, c := range tr.Corrections {
		out.Corrections = append(out.Corrections, &baagentv1.TraceCorrection{AgentError: c.AgentError, HumanFix: c.HumanFix})
	}
	return out
}

// TestLearnTrace covers the learn callback: the used pattern evolves;
// without one, a matching pattern evolves or a new one is made, declined
// for a suppressed signature; other tenants' candidates are never touched.
func TestLearnTrace(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	goal := "Report revenue by region"
	tr := &patterns.Trace{RunID: "r1", UserGoal: goal, Success: true, EntityTypes: []string{"region"},
		ToolCalls: []patterns.ToolCall{{Tool: "sql_query", Success: true}}}
	mk := func(id, tenant, task string, types ...string) *store.PatternRecord {
		return &store.PatternRecord{Version: 1, Pattern: patterns.Pattern{ID: id, Tenant: tenant,
			Signature: patterns.Signature{TaskType: task, EntityTypes: types}, UsageCount: 1, SuccessCount: 1, SuccessRate: 1,
			CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour)}}
	}
	t.Run("used evolves", func(t *testing.T) {
		used := mk("pt_used", "acme", patterns.TaskTrend)
		other := mk("pt_match", "acme", patterns.TaskReport, "region")
		r, created := learnTrace(tr, "acme", "pt_used", []*store.PatternRecord{other, used}, nil, now)
		if r != used || created || used.UsageCount != 2 || other.UsageCount != 1 {
			t.Fatalf("got %v created %v; used %d other %d", r, created, used.UsageCount, other.UsageCount)
		}
	})
	t.Run("used of another tenant learns instead", func(t *testing.T) {
		foreign := mk("pt_foreign", "beta", patterns.TaskReport, "region")
		own := mk("pt_own", "acme", patterns.TaskReport, "region")
		r, created := learnTrace(tr, "acme", "pt_foreign", []*store.PatternRecord{foreign, own}, nil, now)
		if r != own || created || foreign.UsageCount != 1 || own.UsageCount != 2 {
			t.Fatalf("got %v created %v; foreign %d own %d", r, created, foreign.UsageCount, own.UsageCount)
		}
	})
	t.Run("new pattern", func(t *testing.T) {
		r, created := learnTrace(tr, "acme", "", nil, nil, now)
		if r == nil || !created || !validID(patternPrefix, r.ID) || r.Tenant != "acme" || r.Signature.TaskType != patterns.TaskReport {
			t.Fatalf("got %+v created %v", r, created)
		}
	})
	t.Run("suppressed", func(t *testing.T) {
		sup := []patterns.Signature{{TaskType: patterns.TaskReport, EntityTypes: []string{"region"}}}
		if r, created := learnTrace(tr, "acme", "", nil, sup, now); r != nil || created {
			t.Fatalf("learned %+v from a suppressed signature", r)
		}
	})
	t.Run("failure learns nothing new", func(t *testing.T) {
		failed := *tr
		failed.Success = false
		if r, _ := learnTrace(&failed, "acme", "", nil, nil, now); r != nil {
			t.Fatalf("learned %+v from a failure", r)
		}
	})
}

// FuzzPatternConversions feeds arbitrary bytes as a trace and as an edit:
// the trace converts within its bounds and scrubs without panicking; an
// edit that passes validation applies within the rules' caps.
func FuzzPatternConversions(f *testing.F) {
	seed := &baagentv1.InteractionTrace{RunId: "r", UserGoal: "Compare revenue vs cost for jane@example.com",
		ToolCalls: []*baagentv1.TraceToolCall{{Tool: "sql", Success: true, PlanStep: 1}},
		Decisions: []*baagentv1.TraceDecision{{Question: "q", Options: []string{"a"}, UserChoice: "a", Impact: "high"}}}
	edit := &baagentv1.UpdatePatternRequest{Tenant: "acme", Id: newID(patternPrefix, time.Now()), Edit: &baagentv1.PatternEdit{
		Name: str("n"), ReplaceSteps: true, Steps: []*baagentv1.PatternStep{{Description: "d", Tools: []string{"t"}}},
		ToolChain: &baagentv1.ToolChain{Tools: []string{"t"}},
	}}
	f.Add(vt.Marshal(f, seed), vt.Marshal(f, edit))
	f.Add([]byte{0xff}, []byte{})
	f.Fuzz(func(t *testing.T, traceData, editData []byte) {
		in := &baagentv1.InteractionTrace{}
		if proto.Unmarshal(traceData, in) == nil {
			tr := traceFromProto(in)
			if len(tr.UserGoal) > MaxGoalBytes || len(tr.ToolCalls) > MaxTraceToolCalls || len(tr.PlanSteps) > MaxTracePlanSteps ||
				len(tr.Decisions) > MaxTraceDecisions || len(tr.Corrections) > MaxTraceCorrections || len(tr.Clarifications) > MaxTraceClarifications ||
				strings.IndexByte(tr.UserGoal, 0) >= 0 || !utf8.ValidString(tr.UserGoal) || tr.DurationMs < 0 {
				t.Fatalf("out of bounds: %+v", tr)
			}
			scrubTrace(&tr)
			patterns.FromTrace(&tr, "pt_x", "acme", time.Unix(0, 0))
		}
		req := &baagentv1.UpdatePatternRequest{}
		if proto.Unmarshal(editData, req) != nil {
			return
		}
		if err := validateUpdatePattern(req); err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("validation error %v", err)
			}
			return
		}
		var p patterns.Pattern
		scrubEdit(req.GetEdit())
		applyEdit(&p, req.GetEdit(), time.Unix(0, 0))
		if len(p.Steps) > patterns.MaxSteps || len(p.ToolChains) > patterns.MaxToolChains || len(p.Name) > 4*MaxPatternNameBytes {
			t.Fatalf("edit out of bounds: %+v", p)
		}
	})
}

// FuzzPatternHandlers feeds arbitrary bytes as each pattern request to the
// handlers (no gRPC in between) over a real SQLite store holding a
// pattern: nothing panics, a refusal is InvalidArgument with a BadRequest
// detail, and nothing ends in Internal.
func FuzzPatternHandlers(f *testing.F) {
	ts := newTestServer(f, Options{}, false)
	s := ts.srv
	ctx := context.Background()
	resp, err := s.RecordTrace(ctx, &baagentv1.RecordTraceRequest{Tenant: "acme", Trace: &baagentv1.InteractionTrace{
		RunId: "seed", UserGoal: "Report monthly revenue", Success: true,
		ToolCalls: []*baagentv1.TraceToolCall{{Tool: "sql_query", Success: true}},
	}})
	if err != nil {
		f.Fatal(err)
	}
	id := resp.GetPatternId()
	handlers := []func(context.Context, []byte) (bool, error){
		vt.Handler(s.MatchPatterns), vt.Handler(s.RecordTrace), vt.Handler(s.ListPatterns), vt.Handler(s.GetPattern),
		vt.Handler(s.UpdatePattern), vt.Handler(s.DeletePattern), vt.Handler(s.MarkPatternUseless), vt.Handler(s.GrantPattern),
		vt.Handler(s.RevokePatternGrant), vt.Handler(s.ListPatternGrants),
	}
	for i, m := range []proto.Message{
		&baagentv1.MatchPatternsRequest{Tenant: "acme", Goal: "Report monthly revenue", ConversationId: "c1"},
		&baagentv1.RecordTraceRequest{Tenant: "acme", Trace: &baagentv1.InteractionTrace{RunId: "r2", UserGoal: "Report revenue", PatternId: id, PatternMode: "reuse"}},
		&baagentv1.ListPatternsRequest{Tenant: "acme", State: baagentv1.PatternState_PATTERN_STATE_ACTIVE, IncludeShared: true, PageSize: 2},
		&baagentv1.GetPatternRequest{Tenant: "acme", Id: id},
		&baagentv1.UpdatePatternRequest{Tenant: "acme", Id: id, Edit: &baagentv1.PatternEdit{Name: str("n"), ToolChain: &baagentv1.ToolChain{Tools: []string{"t"}}}},
		&baagentv1.DeletePatternRequest{Tenant: "beta", Id: id},
		&baagentv1.MarkPatternUselessRequest{Tenant: "beta", Id: id, Reason: "no"},
		&baagentv1.GrantPatternRequest{Tenant: "acme", Id: id, GranteeTenant: "beta"},
		&baagentv1.RevokePatternGrantRequest{Tenant: "acme", Id: id, GranteeTenant: "beta"},
		&baagentv1.ListPatternGrantsRequest{Tenant: "acme", Id: id},
	} {
		f.Add(uint8(i), vt.Marshal(f, m))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		ok, err := handlers[int(which)%len(handlers)](t.Context(), data)
		if !ok || err == nil {
			return
		}
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.NotFound, codes.PermissionDenied, codes.FailedPrecondition:
		case codes.InvalidArgument:
			if cerr := vt.CheckEdge(err); cerr != nil {
				t.Fatal(cerr)
			}
		default:
			t.Fatalf("handler %d: %v", int(which)%len(handlers), err)
		}
	})
}
