package orchestrator

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/llm"
	"github.com/baagent/baagent/internal/scripted"
)

// TestScenarios plays every scenario of examples/scenarios through the
// whole pipeline: the scripted model served over HTTP and called through
// the OpenAI-compatible client, the real tokens, skills, context and
// toolrunner services over the sample data. Each run must complete with
// the event invariants and a history whose tool calls are all answered.
func TestScenarios(t *testing.T) {
	h, sc := scenarioHarness(t)

	for _, s := range sc.Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			ctx := testCtx(t)
			run := h.start(ctx, &baagentv1.RunSpec{Input: s.Example})
			evs := h.events(ctx, run.GetRunId())
			checkEnvelope(t, run, evs)
			last := evs[len(evs)-1]
			if last.GetComplete() == nil || last.GetComplete().GetContent() == "" {
				t.Fatalf("events %v; last %v", types(evs), last)
			}
			if !evs[0].GetStart().GetScriptedModel() || evs[0].GetStart().GetModel() != scripted.ModelName {
				t.Errorf("start = %v", evs[0].GetStart())
			}
			acts, observes := 0, 0
			for _, e := range evs {
				if e.GetAct() != nil {
					acts++
				}
				if e.GetObserve() != nil {
					observes++
				}
			}
			if acts == 0 || acts != observes {
				t.Errorf("%d act and %d observe events", acts, observes)
			}
			hist, err := h.srv.opts.Context.GetHistory(ctx, &baagentv1.GetHistoryRequest{Tenant: testTenant, ConversationId: run.GetConversationId(), PageSize: 1000})
			if err != nil {
				t.Fatal(err)
			}
			checkPairing(t, hist.GetMessages())
			t.Logf("%s: %d events, %d tool calls; answer: %.120q", s.Name, len(evs), acts, last.GetComplete().GetContent())
		})
	}
}

// scenarioHarness serves the shipped scenarios with the scripted model over
// HTTP and runs the orchestrator against it through the OpenAI-compatible
// client, with the real peers over the sample data.
func scenarioHarness(t *testing.T) (*harness, *scripted.Server) {
	t.Helper()
	sc, err := scripted.New(scripted.Options{Dir: filepath.Join("..", "..", "examples", "scenarios")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	baseURL, done, err := sc.StartLoopback(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	client, err := llm.New(llm.Config{BaseURL: baseURL, Model: scripted.ModelName, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil, harnessOptions{real: realPeers, mutate: func(o *Options) {
		o.Model = LLM(client)
		o.DefaultModel = scripted.ModelName
	}})
	return h, sc
}
