package orchestrator

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baagent/baagent/core/pricing"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	basemetrics "github.com/baagent/baagent/internal/metrics"
)

// withUsage sets the usage the model reports for resp.
func withUsage(resp *ModelResponse, prompt, cached, completion int64) *ModelResponse {
	resp.Usage = &baagentv1.Usage{PromptTokens: prompt, CachedPromptTokens: cached, CompletionTokens: completion, TotalTokens: prompt + completion}
	return resp
}

// costUpdates returns the run's cost_update events.
func costUpdates(evs []*baagentv1.Event) []*baagentv1.CostUpdatePayload {
	var out []*baagentv1.CostUpdatePayload
	for _, e := range evs {
		if cu := e.GetCostUpdate(); cu != nil {
			out = append(out, cu)
		}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// TestRunCostFromBuiltinPrices runs a dated snapshot of a built-in model
// against the real tokens service: the price comes from the built-in table
// (gpt-4o's, with cached input), cost_update carries it, and the per-tenant
// counters are labelled with the table's name.
func TestRunCostFromBuiltinPrices(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, _ ModelRequest) (*ModelResponse, error) {
		if n == 0 {
			return withUsage(callTools("", "call_1", "sql_query", `{"query":"SELECT 1"}`), 1000, 400, 100), nil
		}
		return withUsage(answer("done"), 2000, 0, 50), nil
	}, harnessOptions{mutate: func(o *Options) { o.SkillTriggers = SkillTriggersOff }})

	const model = "gpt-4o-2024-08-06"
	run := h.start(ctx, &baagentv1.RunSpec{Input: "hi", ConversationId: "conv-cost", Model: model})
	evs := h.events(ctx, run.GetRunId())
	cus := costUpdates(evs)
	if len(cus) != 2 {
		t.Fatalf("%d cost updates, want 2: %v", len(cus), types(evs))
	}
	// gpt-4o: $2.50 input, $1.25 cached input, $10 output per 1M tokens.
	step1 := (600*2.5 + 400*1.25 + 100*10) / 1e6
	step2 := (2000*2.5 + 50*10) / 1e6
	if cu := cus[0]; !cu.GetPriceKnown() || cu.GetPriceAsOf() != "2024-10-01" || cu.GetCachedInputTokens() != 400 || !near(cu.GetStepCostUsd(), step1) || cu.GetModel() != model {
		t.Errorf("first cost_update = %v", cu)
	}
	if cu := cus[1]; !cu.GetPriceKnown() || cu.GetCachedInputTokens() != 0 || !near(cu.GetStepCostUsd(), step2) || !near(cu.GetTotalCostUsd(), step1+step2) {
		t.Errorf("second cost_update = %v", cu)
	}
	m := evs[len(evs)-1].GetComplete().GetMetrics()
	if !near(m.GetTotalCostUsd(), step1+step2) || !near(m.GetCostByModel()[model], step1+step2) || len(m.GetCostByModel()) != 1 || m.GetUnpricedCalls() != 0 {
		t.Errorf("metrics = %v", m)
	}

	c := h.srv.metrics.cost
	for kind, want := range map[string]float64{tokensInput: 600 + 2000, tokensCachedInput: 400, tokensOutput: 150} {
		if got := testutil.ToFloat64(c.tokens.WithLabelValues(testTenant, "gpt-4o", kind)); got != want {
			t.Errorf("baagent_model_tokens_total{kind=%q} = %v, want %v", kind, got, want)
		}
	}
	if got := testutil.ToFloat64(c.cost.WithLabelValues(testTenant, "gpt-4o")); !near(got, step1+step2) {
		t.Errorf("baagent_model_cost_usd_total = %v, want %v", got, step1+step2)
	}
	if got := testutil.ToFloat64(c.unpriced.WithLabelValues(testTenant)); got != 0 {
		t.Errorf("unpriced calls = %v", got)
	}
	// The counters are registered on the server's registry.
	if n, err := testutil.GatherAndCount(h.reg, "baagent_model_tokens_total", "baagent_model_cost_usd_total"); err != nil || n != 4 {
		t.Errorf("gathered %d model series (err %v), want 3 token kinds and 1 cost", n, err)
	}
}

// TestRunCostBeyondTierIsUnknown: a prompt beyond the tier limit of a tiered
// price (gemini-2.5-pro, 200,000 tokens) has an unknown cost, not the
// cheaper tier's; a later call within the tier is priced.
func TestRunCostBeyondTierIsUnknown(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(_ context.Context, n int, _ ModelRequest) (*ModelResponse, error) {
		if n == 0 {
			return withUsage(callTools("", "call_1", "sql_query", `{"query":"SELECT 1"}`), 250_000, 0, 10), nil
		}
		return withUsage(answer("done"), 1000, 0, 10), nil
	}, harnessOptions{mutate: func(o *Options) { o.SkillTriggers = SkillTriggersOff }})

	run := h.start(ctx, &baagentv1.RunSpec{Input: "hi", ConversationId: "conv-tier", Model: "gemini-2.5-pro"})
	evs := h.events(ctx, run.GetRunId())
	cus := costUpdates(evs)
	if len(cus) != 2 {
		t.Fatalf("%d cost updates, want 2", len(cus))
	}
	if cu := cus[0]; cu.GetPriceKnown() || cu.GetStepCostUsd() != 0 || cu.GetPriceAsOf() != "" {
		t.Errorf("beyond the tier: cost_update = %v", cu)
	}
	within := (1000*1.25 + 10*10) / 1e6
	if cu := cus[1]; !cu.GetPriceKnown() || !near(cu.GetStepCostUsd(), within) || cu.GetPriceAsOf() == "" {
		t.Errorf("within the tier: cost_update = %v", cu)
	}
	m := evs[len(evs)-1].GetComplete().GetMetrics()
	if m.GetUnpricedCalls() != 1 || !near(m.GetTotalCostUsd(), within) || m.GetLlmCalls() != 2 {
		t.Errorf("metrics = %v", m)
	}
	c := h.srv.metrics.cost
	if got := testutil.ToFloat64(c.unpriced.WithLabelValues(testTenant)); got != 1 {
		t.Errorf("unpriced calls = %v, want 1", got)
	}
	// The unpriced call's tokens count under "other".
	if got := testutil.ToFloat64(c.tokens.WithLabelValues(testTenant, basemetrics.OtherLabel, tokensInput)); got != 250_000 {
		t.Errorf("tokens of the unpriced call = %v", got)
	}
}

// TestRunCostUnknownModel: a model with no price reports unknown costs
// and no cost_by_model entry.
func TestRunCostUnknownModel(t *testing.T) {
	ctx := testCtx(t)
	h := newHarness(t, func(context.Context, int, ModelRequest) (*ModelResponse, error) {
		return answer("done"), nil
	}, harnessOptions{mutate: func(o *Options) { o.SkillTriggers = SkillTriggersOff }})
	run := h.start(ctx, &baagentv1.RunSpec{Input: "hi", ConversationId: "conv-unpriced", Model: "house-model-7b"})
	evs := h.events(ctx, run.GetRunId())
	cus := costUpdates(evs)
	if len(cus) != 1 || cus[0].GetPriceKnown() || cus[0].GetStepCostUsd() != 0 || cus[0].GetUsage().GetPromptTokens() != 100 {
		t.Fatalf("cost updates = %v", cus)
	}
	m := evs[len(evs)-1].GetComplete().GetMetrics()
	if m.GetUnpricedCalls() != 1 || m.GetTotalCostUsd() != 0 || len(m.GetCostByModel()) != 0 {
		t.Errorf("metrics = %v", m)
	}
}

func TestFirstSeenBoundsLabels(t *testing.T) {
	t.Parallel()

	f := newFirstSeen(3)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.label(fmt.Sprintf("t%d", i%10))
		}()
	}
	wg.Wait()
	kept := 0
	for i := range 10 {
		switch got := f.label(fmt.Sprintf("t%d", i)); got {
		case basemetrics.OtherLabel:
		case fmt.Sprintf("t%d", i):
			kept++
		default:
			t.Fatalf("label(t%d) = %q", i, got)
		}
	}
	if kept != 3 {
		t.Errorf("%d values kept their name, want 3", kept)
	}
	if f.label("") != basemetrics.OtherLabel || f.label(basemetrics.OtherLabel) != basemetrics.OtherLabel {
		t.Error("empty or other kept as a value")
	}
}

func TestCostMetricsBoundTenants(t *testing.T) {
	t.Parallel()

	m := newCostMetrics()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.collectors()...)
	in, out := 1.0, 2.0
	meta := &baagentv1.ModelMetadata{Name: "gpt-4o", InputCostPer_1M: &in, OutputCostPer_1M: &out}
	u := &baagentv1.Usage{PromptTokens: 10, CompletionTokens: 1}
	usd, known := pricing.Cost(meta, u)
	for i := range maxTenantLabels + 50 {
		m.record(fmt.Sprintf("tenant-%d", i), meta, pricing.Split(u), usd, known)
	}
	// One series per (tenant, model) for cost: 100 named tenants and other.
	if n := testutil.CollectAndCount(m.cost); n != maxTenantLabels+1 {
		t.Errorf("%d cost series, want %d", n, maxTenantLabels+1)
	}
	if got := testutil.ToFloat64(m.cost.WithLabelValues(basemetrics.OtherLabel, "gpt-4o")); !near(got, 50*usd) {
		t.Errorf("other tenants' cost = %v, want %v", got, 50*usd)
	}
	// An unpriced call's model label is other, whatever its name.
	m.record("tenant-0", &baagentv1.ModelMetadata{Name: "made-up"}, pricing.Split(u), 0, false)
	if got := testutil.ToFloat64(m.tokens.WithLabelValues("tenant-0", basemetrics.OtherLabel, tokensInput)); got != 10 {
		t.Errorf("unpriced tokens = %v", got)
	}
}
