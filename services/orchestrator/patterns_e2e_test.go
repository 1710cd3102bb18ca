package orchestrator

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/scripted"
	"github.com/baagent/baagent/internal/scripted/scriptedtest"
	"github.com/baagent/baagent/internal/testkit"
	vt "github.com/baagent/baagent/internal/validate/validatetest"
	"github.com/baagent/baagent/services/memory"
	"github.com/baagent/baagent/services/memory/embed"
	"github.com/baagent/baagent/services/memory/extract"
	"github.com/baagent/baagent/services/memory/store/sqlite"
)

// recordingModel is a model that keeps the requests it is sent.
type recordingModel struct {
	Model
	mu   sync.Mutex
	reqs []ModelRequest
}

func (m *recordingModel) Stream(ctx context.Context, req ModelRequest, onDelta func(ModelDelta)) (*ModelResponse, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.Model.Stream(ctx, req, onDelta)
}

// systemOf is the system text of every request whose user message is q.
func (m *recordingModel) systemOf(q string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.reqs {
		for _, msg := range r.Messages {
			if msg.GetRole() == baagentv1.Role_ROLE_USER && msg.GetContent() == q {
				out = append(out, systemText(r))
				break
			}
		}
	}
	return out
}

// patternSuite is the orchestrator with the real memory service (SQLite
// in a temporary directory, lexical embeddings, extraction by the scripted
// model's gazetteer), the capture consumer delivering episodes and traces
// to it, the real context and toolrunner services over the sample data,
// and the scripted model playing examples/scenarios.
type patternSuite struct {
	*harness
	mem   baagentv1.MemoryServiceClient
	model *recordingModel
}

func newPatternSuite(t *testing.T) *patternSuite {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memory.db"), sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sm, err := scripted.New(scripted.Options{Dir: filepath.Join("..", "..", "examples", "scenarios"), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	llmModel, base := scriptedtest.Serve(t, sm)
	ex, err := extract.NewOpenAI(extract.Config{BaseURL: base, Model: scripted.ModelName})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := memory.New(memory.Options{
		Store: st, Embedder: embed.NewLexical(0), Extractor: ex, Logger: discard,
		PollInterval: 50 * time.Millisecond, CommunityInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Run(t, ctx, ms.Run)
	mem := baagentv1.NewMemoryServiceClient(vt.Serve(t, ms.Register))
	model := &recordingModel{Model: LLM(llmModel)}
	h := newHarness(t, nil, harnessOptions{
		real: realPeersIn(&dataDirs{}),
		mutate: func(o *Options) {
			o.Model = model
			o.DefaultModel = scripted.ModelName
			o.Memory = mem
		},
	})
	consumeCaptures(t, h.js, mem)
	return &patternSuite{harness: h, mem: mem, model: model}
}

func (s *patternSuite) startAs(ctx context.Context, tenant, q string) *baagentv1.Run {
	s.t.Helper()
	resp, err := s.client.StartRun(ctx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: tenant, Spec: &baagentv1.RunSpec{Input: q}})
	if err != nil {
		s.t.Fatalf("StartRun: %v", err)
	}
	return resp.GetRun()
}

// stateOf waits until the tenant's run is in one of states.
func (s *patternSuite) stateOf(ctx context.Context, tenant, runID string, states ...baagentv1.RunState) *baagentv1.Run {
	s.t.Helper()
	var run *baagentv1.Run
	testkit.EventuallyContext(ctx, s.t, "run "+runID+" in "+states[0].String(), func() (bool, string) {
		resp, err := s.client.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: tenant, RunId: runID})
		run = resp.GetRun()
		for _, st := range states {
			if err == nil && run.GetState() == st {
				return true, ""
			}
		}
		return false, run.GetState().String()
	})
	return run
}

// patterns lists the tenant's own patterns.
func (s *patternSuite) patterns(ctx context.Context, tenant string) []*baagentv1.InteractionPattern {
	s.t.Helper()
	resp, err := s.mem.ListPatterns(ctx, &baagentv1.ListPatternsRequest{Tenant: tenant})
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.GetPatterns()
}

// learned waits until the tenant has exactly one pattern, used n times,
// and the run's episode is processed (so that its entities are in the
// graph before the next run), and returns the pattern.
func (s *patternSuite) learned(ctx context.Context, tenant string, run *baagentv1.Run, n int32) *baagentv1.InteractionPattern {
	s.t.Helper()
	var p *baagentv1.InteractionPattern
	testkit.EventuallyContext(ctx, s.t, "the trace of "+run.GetRunId()+" is learned", func() (bool, string) {
		ps := s.patterns(ctx, tenant)
		if len(ps) != 1 {
			return false, strings.Repeat("pattern ", len(ps))
		}
		p = ps[0]
		return p.GetUsageCount() == n, "usage " + p.GetState().String()
	})
	testkit.EventuallyContext(ctx, s.t, "the episode of "+run.GetRunId()+" is processed", func() (bool, string) {
		resp, err := s.mem.ListEpisodes(ctx, &baagentv1.ListEpisodesRequest{Tenant: tenant, ConversationId: run.GetConversationId()})
		if err != nil {
			s.t.Fatal(err)
		}
		eps := resp.GetEpisodes()
		return len(eps) == 1 && eps[0].GetStatus() == baagentv1.EpisodeStatus_EPISODE_STATUS_SYNCED, ""
	})
	return p
}

// matchedOf is the pattern_matched event of a run's events (nil if none).
func matchedOf(evs []*baagentv1.Event) *baagentv1.PatternMatchedPayload {
	p, _ := eventOf(evs, (*baagentv1.Event).GetPatternMatched, func(p *baagentv1.PatternMatchedPayload) bool { return p != nil })
	return p
}

var patternMonths = []string{"March", "April", "May", "June"}

func topProductsQ(month string) string { return "Top 5 products by revenue in " + month + " 2026" }

// learnThree plays three runs of the scenario for tenant, each learned
// before the next starts, and returns the pattern they made.
func (s *patternSuite) learnThree(ctx context.Context, tenant string) *baagentv1.InteractionPattern {
	s.t.Helper()
	var p *baagentv1.InteractionPattern
	for i, month := range patternMonths[:3] {
		run := s.startAs(ctx, tenant, topProductsQ(month))
		done := s.stateOf(ctx, tenant, run.GetRunId(), baagentv1.RunState_RUN_STATE_COMPLETED, baagentv1.RunState_RUN_STATE_FAILED, baagentv1.RunState_RUN_STATE_WAITING_INPUT)
		if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
			s.t.Fatalf("run %d (%s): %v", i+1, month, done)
		}
		evs := readEvents(ctx, s.t, s.js, tenant, run.GetRunId())
		if m := matchedOf(evs); m != nil && m.GetMode() == "reuse" {
			s.t.Fatalf("run %d was offered a reuse before the pattern had three successes: %v", i+1, m)
		}
		p = s.learned(ctx, tenant, run, int32(i+1))
	}
	return p
}

// TestPatternsEndToEnd: learn → offer → accept → evolve. Three runs of the
// same kind of request make a pattern (usage 3, active); the fourth is
// offered it (pattern_matched, mode reuse), asks, is answered Reuse, runs
// with the pattern in its system prompt, and its trace evolves the pattern
// to 4 uses, 4 successes. Tenant B, doing the same against the same memory
// service, is never offered A's pattern (only its own, which it declines).
func TestPatternsEndToEnd(t *testing.T) {
	ctx := testCtx(t)
	s := newPatternSuite(t)
	const tenantA, tenantB = testTenant, "orchestrator-test-b"

	p := s.learnThree(ctx, tenantA)
	if p.GetSuccessCount() != 3 || p.GetState() != baagentv1.PatternState_PATTERN_STATE_ACTIVE || p.GetTaskType() != "ranking" {
		t.Fatalf("pattern after three runs: %v", p)
	}
	// The chain collapses repeated calls of one tool.
	if chain := p.GetToolChains(); len(chain) == 0 || strings.Join(chain[0].GetTools(), ",") != "sql_query" {
		t.Errorf("tool chains %v", chain)
	}

	// The fourth run is offered the pattern.
	q4 := topProductsQ(patternMonths[3])
	run := s.startAs(ctx, tenantA, q4)
	waiting := s.stateOf(ctx, tenantA, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT)
	d := waiting.GetPendingInput().GetDecision()
	if d.GetDecisionId() != patternDecisionID || d.GetDecisionType() != baagentv1.DecisionType_DECISION_TYPE_METHOD || !strings.HasPrefix(d.GetContext(), "A saved approach '") {
		t.Fatalf("pending input %v", waiting.GetPendingInput())
	}
	if got := s.model.systemOf(q4); len(got) != 0 {
		t.Fatalf("the model was called before the decision: %d requests", len(got))
	}
	if _, err := s.client.SubmitInput(ctx, &baagentv1.OrchestratorServiceSubmitInputRequest{Tenant: tenantA, RunId: run.GetRunId(),
		Input: &baagentv1.RunInput{InputId: d.GetDecisionId(), SelectedOptions: []string{"Reuse"}}}); err != nil {
		t.Fatal(err)
	}
	done := s.stateOf(ctx, tenantA, run.GetRunId(), baagentv1.RunState_RUN_STATE_COMPLETED, baagentv1.RunState_RUN_STATE_FAILED)
	if done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED || !strings.Contains(done.GetFinalAnswer(), "2026-06") {
		t.Fatalf("fourth run %v", done)
	}
	evs := readEvents(ctx, t, s.js, tenantA, run.GetRunId())
	m := matchedOf(evs)
	if m == nil || m.GetPatternId() != p.GetId() || m.GetMode() != "reuse" || m.GetScore() <= 0.8 || m.GetDecisionId() != patternDecisionID || m.GetShared() {
		t.Fatalf("pattern_matched %v in %v", m, types(evs))
	}
	ans, _ := eventOf(evs, (*baagentv1.Event).GetDecisionAnswered, func(a *baagentv1.DecisionAnsweredPayload) bool { return a.GetDecisionId() == patternDecisionID })
	if ans.GetAnswer() != "Reuse" || ans.GetTimedOut() {
		t.Fatalf("decision_answered %v", ans)
	}
	sys := s.model.systemOf(q4)
	if len(sys) != 3 {
		t.Fatalf("%d model requests for the fourth run", len(sys))
	}
	for i, text := range sys {
		if !strings.Contains(text, "# Proven approach") || !strings.Contains(text, "Tool chain that worked: sql_query") || !strings.Contains(text, "Approach: "+p.GetName()) {
			t.Errorf("request %d of the fourth run lacks the pattern:\n%s", i, text)
		}
	}
	for _, month := range patternMonths[:3] {
		for _, text := range s.model.systemOf(topProductsQ(month)) {
			if strings.Contains(text, "Proven approach") {
				t.Errorf("the %s run had a pattern to reuse", month)
			}
		}
	}
	p = s.learned(ctx, tenantA, run, 4)
	if p.GetSuccessCount() != 4 || p.GetFailureCount() != 0 {
		t.Fatalf("pattern after the reuse: %v", p)
	}

	// Tenant B: the same four runs against the same memory service.
	pb := s.learnThree(ctx, tenantB)
	if pb.GetId() == p.GetId() || pb.GetTenant() != tenantB {
		t.Fatalf("tenant B's pattern %v", pb)
	}
	runB := s.startAs(ctx, tenantB, q4)
	waitingB := s.stateOf(ctx, tenantB, runB.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT)
	if _, err := s.client.SubmitInput(ctx, &baagentv1.OrchestratorServiceSubmitInputRequest{Tenant: tenantB, RunId: runB.GetRunId(),
		Input: &baagentv1.RunInput{InputId: waitingB.GetPendingInput().GetDecision().GetDecisionId(), Answer: "Plan from scratch"}}); err != nil {
		t.Fatal(err)
	}
	if doneB := s.stateOf(ctx, tenantB, runB.GetRunId(), baagentv1.RunState_RUN_STATE_COMPLETED, baagentv1.RunState_RUN_STATE_FAILED); doneB.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("tenant B's fourth run %v", doneB)
	}
	evsB := readEvents(ctx, t, s.js, tenantB, runB.GetRunId())
	if mb := matchedOf(evsB); mb == nil || mb.GetPatternId() != pb.GetId() || mb.GetShared() {
		t.Fatalf("tenant B was offered %v, want its own %s", mb, pb.GetId())
	}
	// Every run of tenant B saw only its own patterns (checked above for
	// the fourth; the first three were offered no reuse), and A's pattern
	// is untouched by B's runs.
	if pa := s.patterns(ctx, tenantA); len(pa) != 1 || pa[0].GetUsageCount() != 4 {
		t.Fatalf("tenant A's patterns after B's runs: %v", pa)
	}
	// The requests of q4 after A's three are B's declined run's.
	sysB := s.model.systemOf(q4)[3:]
	if len(sysB) == 0 {
		t.Fatal("no model request of B's fourth run")
	}
	for i, text := range sysB {
		if strings.Contains(text, "Proven approach") {
			t.Errorf("request %d of B's declined run has the pattern", i)
		}
	}
}

// TestPatternsDeclinedReuseIsNoUse: a run that declines the reuse of a
// pattern plans from scratch, and its trace (the offered pattern's id with
// an empty mode) does not count as a use of the pattern.
func TestPatternsDeclinedReuseIsNoUse(t *testing.T) {
	ctx := testCtx(t)
	s := newPatternSuite(t)
	p := s.learnThree(ctx, testTenant)
	q := topProductsQ(patternMonths[3])
	run := s.startAs(ctx, testTenant, q)
	waiting := s.stateOf(ctx, testTenant, run.GetRunId(), baagentv1.RunState_RUN_STATE_WAITING_INPUT)
	if _, err := s.client.SubmitInput(ctx, &baagentv1.OrchestratorServiceSubmitInputRequest{Tenant: testTenant, RunId: run.GetRunId(),
		Input: &baagentv1.RunInput{InputId: waiting.GetPendingInput().GetDecision().GetDecisionId(), Answer: "Plan from scratch"}}); err != nil {
		t.Fatal(err)
	}
	if done := s.stateOf(ctx, testTenant, run.GetRunId(), baagentv1.RunState_RUN_STATE_COMPLETED, baagentv1.RunState_RUN_STATE_FAILED); done.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED {
		t.Fatalf("declined run %v", done)
	}
	for i, text := range s.model.systemOf(q) {
		if strings.Contains(text, "Proven approach") || strings.Contains(text, "Approach: ") {
			t.Errorf("request %d of the declined run has the pattern", i)
		}
	}
	// Once the trace is delivered (the capture queue holds nothing of the
	// conversation), the pattern is as the three runs left it.
	testkit.EventuallyContext(ctx, t, "the declined run's trace is delivered", func() (bool, string) {
		return len(captureMsgs(ctx, t, s.js, run.GetConversationId(), "trace")) == 0, "queued"
	})
	got := s.patterns(ctx, testTenant)
	if len(got) != 1 || got[0].GetId() != p.GetId() || got[0].GetUsageCount() != 3 || got[0].GetSuccessCount() != 3 {
		t.Fatalf("pattern after a declined reuse: %v", got)
	}
}
