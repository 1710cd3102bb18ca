package orchestrator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
	"github.com/baagent/baagent/services/orchestrator/internal/hitl"
)

// fakePatterns answers MatchPatterns with a fixed candidate list (or an
// error) and counts the calls.
type fakePatterns struct {
	baagentv1.UnimplementedMemoryServiceServer
	mu    sync.Mutex
	cands []*baagentv1.PatternCandidate
	err   error
	reqs  []*baagentv1.MatchPatternsRequest
	block bool // answer only when the call's deadline passes
}

func (f *fakePatterns) MatchPatterns(ctx context.Context, req *baagentv1.MatchPatternsRequest) (*baagentv1.MatchPatternsResponse, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	cands, err, block := f.cands, f.err, f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err != nil {
		return nil, err
	}
	return &baagentv1.MatchPatternsResponse{Candidates: cands, Enabled: true}, nil
}

func (f *fakePatterns) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func (f *fakePatterns) client(t testing.TB) baagentv1.MemoryServiceClient {
	return baagentv1.NewMemoryServiceClient(vt.Serve(t, func(gs grpc.ServiceRegistrar) { baagentv1.RegisterMemoryServiceServer(gs, f) }))
}

func topProducts() *baagentv1.InteractionPattern {
	return &baagentv1.InteractionPattern{
		Id: "pt_01JTOPPRODUCTS000000000000", Name: "ranking: Product, TimePeriod", Description: "Top 5 products by revenue in March 2026",
		Steps: []*baagentv1.PatternStep{
			{Description: "Total revenue by product for the month", Tools: []string{"sql_query"}, ExpectedOutput: "products with revenue", Corrections: []string{"revenue is quantity * unit_price"}},
			{Description: "Rank and keep the top 5", Tools: []string{"sql_query"}},
		},
		ToolChains: []*baagentv1.ToolChain{{Tools: []string{"sql_query", "sql_query"}}},
		Decisions:  []*baagentv1.PatternDecision{{Question: "Which revenue?", Recommended: "net"}},
		SuccessFactors: &baagentv1.PatternSuccessFactors{
			CommonCorrections: []string{"use orders.unit_price"},
		},
	}
}

func candidate(mode string, score float64) *baagentv1.PatternCandidate {
	return &baagentv1.PatternCandidate{Pattern: topProducts(), Mode: mode, Score: &baagentv1.PatternScore{Score: score, SignatureMatch: true, EntityOverlap: 0.5}}
}

// queryThenAnswer calls sql_query once, then answers.
func queryThenAnswer(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
	if _, ok := lastToolResult(req); ok {
		return answer("Top 5 products: A, B, C, D, E."), nil
	}
	return callTools("Query.", "q1", "sql_query", `{"query":"SELECT 1"}`), nil
}

// systemText is the text of a model request's system messages.
func systemText(req ModelRequest) string {
	var b strings.Builder
	for _, m := range req.Messages {
		if m.GetRole() == baagentv1.Role_ROLE_SYSTEM {
			b.WriteString(m.GetContent())
			b.WriteString("\n")
		}
	}
	return b.String()
}

// traceOf reads the trace a run queued on the capture queue.
func traceOf(ctx context.Context, t *testing.T, js jetstream.JetStream, conv, runID string) *baagentv1.RecordTraceRequest {
	t.Helper()
	var found *baagentv1.RecordTraceRequest
	for _, msg := range captureMsgs(ctx, t, js, conv, natsx.CaptureKindTrace) {
		if msg.Header.Get(jetstream.MsgIDHeader) != "trace:"+runID {
			continue
		}
		if found != nil {
			t.Fatalf("two traces of run %s", runID)
		}
		found = &baagentv1.RecordTraceRequest{}
		if err := proto.Unmarshal(msg.Data, found); err != nil {
			t.Fatal(err)
		}
	}
	if found == nil {
		t.Fatalf("no trace of run %s on the capture queue", runID)
	}
	return found
}

func eventOf[T any](evs []*baagentv1.Event, get func(*baagentv1.Event) T, ok func(T) bool) (T, int) {
	for i, ev := range evs {
		if v := get(ev); ok(v) {
			return v, i
		}
	}
	var zero T
	return zero, -1
}

func TestPatternReferenceGuidesTheRun(t *testing.T) {
	ctx := testCtx(t)
	mem := &fakePatterns{cands: []*baagentv1.PatternCandidate{candidate("reference", 0.7)}}
	h := newHarness(t, queryThenAnswer, harnessOptions{mutate: func(o *Options) { o.Memory = mem.client(t) }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "Top 5 products by revenue in April 2026"})
	evs := h.events(ctx, run.GetRunId())
	done := h.waitRun(ctx, run.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("run %v", done)
	}
	pm, at := eventOf(evs, (*baagentv1.Event).GetPatternMatched, func(p *baagentv1.PatternMatchedPayload) bool { return p != nil })
	if at < 0 {
		t.Fatalf("no pattern_matched in %v", types(evs))
	}
	if pm.GetPatternId() != topProducts().GetId() || pm.GetMode() != "reference" || pm.GetScore() != 0.7 || pm.GetDecisionId() != "" || !pm.GetBreakdown().GetSignatureMatch() {
		t.Errorf("pattern_matched %v", pm)
	}
	if _, start := eventOf(evs, (*baagentv1.Event).GetStart, func(p *baagentv1.StartPayload) bool { return p != nil }); start > at {
		t.Errorf("pattern_matched before start: %v", types(evs))
	}
	if _, step := eventOf(evs, (*baagentv1.Event).GetStepStart, func(p *baagentv1.StepStartPayload) bool { return p != nil }); step < at {
		t.Errorf("pattern_matched after the first step: %v", types(evs))
	}
	if slices.Contains(types(evs), "decision_asked") {
		t.Errorf("a reference is not asked: %v", types(evs))
	}
	reqs := h.model.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	for i, req := range reqs {
		sys := systemText(req)
		for _, want := range []string{"# Reference: a similar past task", "Total revenue by product for the month (tools: sql_query)", "Tool chain that worked: sql_query → sql_query", "Which revenue? → net", "use orders.unit_price"} {
			if !strings.Contains(sys, want) {
				t.Errorf("request %d's system messages lack %q:\n%s", i, want, sys)
			}
		}
	}
	mem.mu.Lock()
	req := mem.reqs[0]
	mem.mu.Unlock()
	if req.GetTenant() != testTenant || req.GetGoal() != "Top 5 products by revenue in April 2026" || req.GetConversationId() != done.GetConversationId() {
		t.Errorf("MatchPatterns request %v", req)
	}
	tr := traceOf(ctx, t, h.js, done.GetConversationId(), done.GetRunId()).GetTrace()
	if tr.GetPatternId() != topProducts().GetId() || tr.GetPatternMode() != "reference" || !tr.GetSuccess() || tr.GetUserGoal() != "Top 5 products by revenue in April 2026" {
		t.Errorf("trace %v", tr)
	}
	if len(tr.GetToolCalls()) != 1 || tr.GetToolCalls()[0].GetTool() != "sql_query" || !tr.GetToolCalls()[0].GetSuccess() || tr.GetFinalResult() != "Top 5 products: A, B, C, D, E." {
		t.Errorf("trace %v", tr)
	}
	if got := testutil.ToFloat64(h.srv.metrics.patterns.matches.WithLabelValues("reference")); got != 1 {
		t.Errorf("reference matches %v", got)
	}
	if got := testutil.ToFloat64(h.srv.metrics.patterns.traces.WithLabelValues(traceQueued)); got != 1 {
		t.Errorf("traces queued %v", got)
	}
}

// reuseRun starts a run offered a reuse and returns it waiting on the
// decision.
func reuseRun(ctx context.Context, t *testing.T, h *harness) (*baagentv1.Run, *baagentv1.DecisionPoint) {
	t.Helper()
	run := h.start(ctx, &baagentv1.RunSpec{Input: "Top 5 products by revenue in May 2026"})
	waiting := h.waitState(ctx, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT)
	d := waiting.GetPendingInput().GetDecision()
	if d.GetDecisionId() != patternDecisionID || d.GetDecisionType() != baagentv1.DecisionType_DECISION_TYPE_METHOD || len(d.GetOptions()) != 2 ||
		d.GetOptions()[0].GetLabel() != "Reuse" || !d.GetOptions()[0].GetIsRecommended() || d.GetOptions()[1].GetLabel() != "Plan from scratch" ||
		d.GetContext() != "A saved approach 'ranking: Product, TimePeriod' matches this request (score 0.87). Reuse it?" {
		t.Fatalf("pending decision %v", d)
	}
	if n := len(h.model.requests()); n != 0 {
		t.Fatalf("the model was asked %d times before the decision", n)
	}
	return run, d
}

func TestPatternReuseAccepted(t *testing.T) {
	ctx := testCtx(t)
	mem := &fakePatterns{cands: []*baagentv1.PatternCandidate{candidate("reuse", 0.87), candidate("reference", 0.6)}}
	h := newHarness(t, queryThenAnswer, harnessOptions{mutate: func(o *Options) { o.Memory = mem.client(t) }})
	run, d := reuseRun(ctx, t, h)
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), Answer: "Maybe"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an answer that is no option: %v", err)
	}
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), SelectedOptions: []string{"reuse"}}); err != nil {
		t.Fatal(err)
	}
	done := h.waitRun(ctx, run.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("run %v", done)
	}
	evs := h.events(ctx, run.GetRunId())
	checkEnvelope(t, done, evs)
	pm, at := eventOf(evs, (*baagentv1.Event).GetPatternMatched, func(p *baagentv1.PatternMatchedPayload) bool { return p != nil })
	if pm.GetMode() != "reuse" || pm.GetDecisionId() != patternDecisionID || pm.GetScore() != 0.87 {
		t.Fatalf("pattern_matched %v", pm)
	}
	_, asked := eventOf(evs, (*baagentv1.Event).GetDecisionAsked, func(p *baagentv1.DecisionPoint) bool { return p.GetDecisionId() == patternDecisionID })
	ans, answered := eventOf(evs, (*baagentv1.Event).GetDecisionAnswered, func(p *baagentv1.DecisionAnsweredPayload) bool { return p.GetDecisionId() == patternDecisionID })
	if asked < at || answered < asked || ans.GetAnswer() != "Reuse" || ans.GetTimedOut() {
		t.Fatalf("decision events (%d, %d, %d) %v: %v", at, asked, answered, ans, types(evs))
	}
	if n := strings.Count(strings.Join(types(evs), ","), "pattern_matched"); n != 1 {
		t.Errorf("%d pattern_matched events", n)
	}
	for i, req := range h.model.requests() {
		if sys := systemText(req); !strings.Contains(sys, "# Proven approach") || !strings.Contains(sys, "Follow this proven approach") || !strings.Contains(sys, "Rank and keep the top 5") {
			t.Errorf("request %d's system messages:\n%s", i, sys)
		}
	}
	if mem.calls() != 1 {
		t.Errorf("MatchPatterns called %d times, want 1 (the resumed run does not match again)", mem.calls())
	}
	tr := traceOf(ctx, t, h.js, done.GetConversationId(), done.GetRunId()).GetTrace()
	if tr.GetPatternId() != topProducts().GetId() || tr.GetPatternMode() != "reuse" || len(tr.GetDecisions()) != 0 || tr.GetHumanInterventions() != 0 {
		t.Errorf("trace %v", tr)
	}
	if got := testutil.ToFloat64(h.srv.metrics.patterns.decisions.WithLabelValues(decisionReuse)); got != 1 {
		t.Errorf("reuse decisions %v", got)
	}
	if got := testutil.ToFloat64(h.srv.metrics.waits.WithLabelValues(hitl.KindPattern)); got != 1 {
		t.Errorf("pattern waits %v", got)
	}
}

func TestPatternReuseDeclined(t *testing.T) {
	ctx := testCtx(t)
	mem := &fakePatterns{cands: []*baagentv1.PatternCandidate{candidate("reuse", 0.87)}}
	h := newHarness(t, queryThenAnswer, harnessOptions{mutate: func(o *Options) { o.Memory = mem.client(t) }})
	run, d := reuseRun(ctx, t, h)
	if err := h.submit(ctx, run.GetRunId(), &baagentv1.RunInput{InputId: d.GetDecisionId(), Answer: "plan from scratch"}); err != nil {
		t.Fatal(err)
	}
	done := h.waitRun(ctx, run.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("run %v", done)
	}
	for i, req := range h.model.requests() {
		if sys := systemText(req); strings.Contains(sys, "Proven approach") || strings.Contains(sys, "Rank and keep the top 5") {
			t.Errorf("request %d has the declined pattern:\n%s", i, sys)
		}
	}
	tr := traceOf(ctx, t, h.js, done.GetConversationId(), done.GetRunId()).GetTrace()
	if tr.GetPatternId() != topProducts().GetId() || tr.GetPatternMode() != "" || !tr.GetSuccess() {
		t.Errorf("trace of a declined reuse %v", tr)
	}
	if got := testutil.ToFloat64(h.srv.metrics.patterns.decisions.WithLabelValues(decisionScratch)); got != 1 {
		t.Errorf("scratch decisions %v", got)
	}
}

func TestPatternReuseTimesOut(t *testing.T) {
	ctx := testCtx(t)
	mem := &fakePatterns{cands: []*baagentv1.PatternCandidate{candidate("reuse", 0.87)}}
	h := newHarness(t, queryThenAnswer, harnessOptions{mutate: func(o *Options) { o.Memory = mem.client(t); o.DecisionTimeout = time1s }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "Top 5 products by revenue in June 2026"})
	done := h.waitRun(ctx, run.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("run %v", done)
	}
	evs := h.events(ctx, run.GetRunId())
	ans, i := eventOf(evs, (*baagentv1.Event).GetDecisionAnswered, func(p *baagentv1.DecisionAnsweredPayload) bool { return p.GetDecisionId() == patternDecisionID })
	if i < 0 || !ans.GetTimedOut() {
		t.Fatalf("decision_answered %v in %v", ans, types(evs))
	}
	for _, req := range h.model.requests() {
		if strings.Contains(systemText(req), "Proven approach") {
			t.Fatal("a timed-out reuse guides the run")
		}
	}
	if tr := traceOf(ctx, t, h.js, done.GetConversationId(), done.GetRunId()).GetTrace(); tr.GetPatternMode() != "" {
		t.Errorf("trace %v", tr)
	}
	if got := testutil.ToFloat64(h.srv.metrics.patterns.decisions.WithLabelValues(decisionTimedOut)); got != 1 {
		t.Errorf("timed-out decisions %v", got)
	}
}

func TestPatternMatchFailuresDoNotFailTheRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mem     *fakePatterns
		outcome string
	}{
		{"unimplemented", &fakePatterns{err: status.Error(codes.Unimplemented, "no patterns")}, matchUnimplemented},
		{"unavailable", &fakePatterns{err: status.Error(codes.Unavailable, "down")}, matchError},
		{"slow", &fakePatterns{block: true}, matchError},
		{"none", &fakePatterns{cands: []*baagentv1.PatternCandidate{{Pattern: topProducts(), Mode: "scratch"}}}, matchNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			h := newHarness(t, queryThenAnswer, harnessOptions{mutate: func(o *Options) { o.Memory = tc.mem.client(t) }})
			run := h.start(ctx, &baagentv1.RunSpec{Input: "Top 5 products by revenue in July 2026"})
			done := h.waitRun(ctx, run.GetRunId())
			if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
				t.Fatalf("run %v", done)
			}
			if slices.Contains(types(h.events(ctx, run.GetRunId())), "pattern_matched") {
				t.Error("pattern_matched without a match")
			}
			if got := testutil.ToFloat64(h.srv.metrics.patterns.matches.WithLabelValues(tc.outcome)); got != 1 {
				t.Errorf("%s matches %v", tc.outcome, got)
			}
		})
	}
}

func TestPatternsNotForSubAgentsOrWithoutMemory(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, queryThenAnswer, harnessOptions{})
	started := h.start(ctx, &baagentv1.RunSpec{Input: "Top 5 products by revenue in August 2026"})
	done := h.waitRun(ctx, started.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("run %v", done)
	}
	if got := testutil.ToFloat64(h.srv.metrics.patterns.traces.WithLabelValues(traceQueued)); got != 0 {
		t.Errorf("traces queued without a memory service: %v", got)
	}
	// A sub-agent run is neither matched nor traced.
	r := &run{s: h.srv, rec: &baagentv1.Run{ParentRunId: "run_parent"}}
	if err := r.matchPattern(ctx); err != nil || r.pattern != nil {
		t.Errorf("sub-agent run matched: %v %v", r.pattern, err)
	}
}

func TestPatternTraceOfAFailedRun(t *testing.T) {
	ctx := testCtx(t)
	mem := &fakePatterns{}
	fail := func(_ context.Context, _ int, req ModelRequest) (*ModelResponse, error) {
		if _, ok := lastToolResult(req); ok {
			return nil, errors.New("model endpoint exploded")
		}
		return callTools("Query.", "q1", "sql_query", `{"query":"SELECT 1"}`), nil
	}
	h := newHarness(t, fail, harnessOptions{mutate: func(o *Options) { o.Memory = mem.client(t) }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "Top 5 products by revenue in September 2026"})
	done := h.waitRun(ctx, run.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_FAILED {
		t.Fatalf("run %v", done)
	}
	tr := traceOf(ctx, t, h.js, done.GetConversationId(), done.GetRunId())
	if tr.GetTenant() != testTenant || tr.GetTrace().GetSuccess() || tr.GetTrace().GetRunId() != done.GetRunId() || len(tr.GetTrace().GetToolCalls()) != 1 || tr.GetTrace().GetDurationMs() < 0 {
		t.Errorf("trace %v", tr)
	}
}

func TestPatternCheckpointRoundTrip(t *testing.T) {
	r := &run{pattern: &checkpoint.Pattern{Checked: true, ID: "pt_1", Mode: matchReuse, DecisionID: patternDecisionID, Decision: decisionReuse, Guidance: strings.Repeat("é", 5000) + "\xff"}}
	cp := r.patternCheckpoint()
	cp.Name = "changed"
	if r.pattern.Name == "changed" {
		t.Fatal("the checkpoint shares the run's state")
	}
	var r2 run
	r2.restorePattern(cp)
	if r2.pattern.ID != "pt_1" || len(r2.pattern.Guidance) > patternGuidanceBytes || !strings.HasPrefix(r2.patternMessage()[0].GetContent(), "# Proven approach") {
		t.Errorf("restored %v", r2.pattern)
	}
	r2.pattern.Decision = decisionScratch
	if r2.patternMessage() != nil {
		t.Error("a declined pattern guides the run")
	}
	var r3 run
	r3.restorePattern(nil)
	if r3.pattern != nil || r3.patternMessage() != nil {
		t.Error("no pattern restored from nothing")
	}
}

func TestPatternGuidanceBounded(t *testing.T) {
	p := topProducts()
	for range 50 {
		p.Steps = append(p.Steps, &baagentv1.PatternStep{Description: strings.Repeat("step ", 400), Tools: []string{strings.Repeat("t", 500)}, Corrections: []string{strings.Repeat("c", 900)}})
	}
	p.Name = strings.Repeat("\xffname", 100)
	g := PatternGuidance(p)
	if len(g) > patternGuidanceBytes || !strings.HasPrefix(g, "Approach: ") || !strings.Contains(g, "1. Total revenue by product for the month (tools: sql_query) → products with revenue") {
		t.Fatalf("guidance of %d bytes:\n%.400s", len(g), g)
	}
	if !strings.Contains(PatternGuidance(topProducts()), "   Users corrected: revenue is quantity * unit_price") {
		t.Errorf("guidance lacks the step's correction:\n%s", PatternGuidance(topProducts()))
	}
	if g := PatternGuidance(&baagentv1.InteractionPattern{}); g != "Approach:" {
		t.Errorf("empty pattern's guidance %q", g)
	}
}

// TestPatternReuseWaitSurvivesTheReplica: the replica that asked the reuse
// decision goes away while the run waits; another replica resumes it with
// the answer from its checkpoint, without matching or asking again.
func TestPatternReuseWaitSurvivesTheReplica(t *testing.T) {
	ctx := testCtx(t)
	mem := &fakePatterns{cands: []*baagentv1.PatternCandidate{candidate("reuse", 0.87)}}
	h := newHarness(t, queryThenAnswer, harnessOptions{mutate: func(o *Options) { o.Memory = mem.client(t) }})
	run, d := reuseRun(ctx, t, h)
	h.stop()
	_, client2, _ := h.replica("replica-2")
	if _, err := client2.SubmitInput(ctx, &baagentv1.OrchestratorServiceSubmitInputRequest{Tenant: testTenant, RunId: run.GetRunId(),
		Input: &baagentv1.RunInput{InputId: d.GetDecisionId(), Answer: "Reuse"}}); err != nil {
		t.Fatal(err)
	}
	evs := h.events(ctx, run.GetRunId())
	resp, err := client2.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: run.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	done := resp.GetRun()
	if last := evs[len(evs)-1]; last.GetComplete() == nil {
		t.Fatalf("run ended with %v: %v", last, types(evs))
	}
	count := func(typ string) int {
		n := 0
		for _, x := range types(evs) {
			if x == typ {
				n++
			}
		}
		return n
	}
	if count("start") != 1 || count("pattern_matched") != 1 || count("decision_asked") != 1 || count("decision_answered") != 1 {
		t.Fatalf("events %v", types(evs))
	}
	if mem.calls() != 1 {
		t.Errorf("MatchPatterns called %d times", mem.calls())
	}
	reqs := h.model.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	for i, req := range reqs {
		if !strings.Contains(systemText(req), "# Proven approach") {
			t.Errorf("request %d on the second replica lacks the pattern", i)
		}
	}
	if tr := traceOf(ctx, t, h.js, done.GetConversationId(), done.GetRunId()).GetTrace(); tr.GetPatternMode() != "reuse" {
		t.Errorf("trace %v", tr)
	}
}

// TestPatternTraceOfAPlannedRun: the trace of a real planned run, whose
// plan the user edited at approval: the approvals are high-impact
// decisions, the edit is a correction against the plan as proposed, the
// plan steps are the final plan's with what completed and the tools used,
// and the plan tools are not among the tool calls.
func TestPatternTraceOfAPlannedRun(t *testing.T) {
	ctx := testCtx(t)
	mem := &fakePatterns{}
	h := newHarness(t, func(_ context.Context, n int, req ModelRequest) (*ModelResponse, error) {
		switch n {
		case 0:
			return callTools("", "p0", "plan", twoSteps), nil
		case 1:
			return callTools("", "p1", "plan", `{"steps":[{"description":"first"},{"description":"costs"},{"description":"second"}]}`), nil
		case 2:
			return callTools("", "q1", "sql_query", `{"query":"SELECT 1"}`), nil
		case 3:
			return callTools("", "u1", "update_plan", markDone("1")), nil
		}
		return answer("done"), nil
	}, harnessOptions{mutate: func(o *Options) { o.PlanApproval = true; o.Memory = mem.client(t) }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "Report revenue and costs", Plan: baagentv1.PlanMode_PLAN_MODE_ALWAYS})
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
	done := h.waitRun(ctx, run.GetRunId())
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("run %v", done)
	}
	tr := traceOf(ctx, t, h.js, done.GetConversationId(), done.GetRunId()).GetTrace()
	if d := tr.GetDecisions(); len(d) != 2 || d[0].GetImpact() != "high" || d[0].GetUserChoice() != "add a step for costs" || d[1].GetUserChoice() != "approve" || d[1].GetRecommended() != "approve" {
		t.Errorf("decisions %v", d)
	}
	if c := tr.GetCorrections(); len(c) != 1 || c[0].GetAgentError() != "1. first\n2. second" || c[0].GetHumanFix() != "add a step for costs" {
		t.Errorf("corrections %v", c)
	}
	steps := tr.GetPlanSteps()
	if len(steps) != 3 || steps[0].GetDescription() != "first" || steps[1].GetDescription() != "costs" || !steps[0].GetDone() || strings.Join(steps[0].GetTools(), ",") != "sql_query" {
		t.Errorf("plan steps %v", steps)
	}
	if c := tr.GetToolCalls(); len(c) != 1 || c[0].GetTool() != "sql_query" || c[0].GetPlanStep() != 1 || !c[0].GetSuccess() {
		t.Errorf("tool calls %v", c)
	}
	// Two answers and the edit.
	if tr.GetHumanInterventions() != 3 || !tr.GetSuccess() || tr.GetDurationMs() <= 0 {
		t.Errorf("trace %v", tr)
	}
}
