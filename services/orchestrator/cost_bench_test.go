package orchestrator

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/core/pricing"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/services/orchestrator/internal/convmetrics"
)

// BenchmarkPriceModelCall is what pricing one model call adds to a step:
// the cost from the model's metadata (pricing.Cost and Split) and the
// per-tenant counters (baagent_model_tokens_total, _cost_usd_total), plus,
// in "with-run-metrics", the run's own accumulator (cost_by_model).
func BenchmarkPriceModelCall(b *testing.B) {
	in, cached, out := 2.5, 1.25, 10.0
	meta := &baagentv1.ModelMetadata{Name: "gpt-4o", InputCostPer_1M: &in, CachedInputCostPer_1M: &cached, OutputCostPer_1M: &out, PriceAsOf: "2024-10-01"}
	u := &baagentv1.Usage{PromptTokens: 12_000, CachedPromptTokens: 8_000, CompletionTokens: 400, TotalTokens: 12_400}
	for _, withRun := range []bool{false, true} {
		name := "cost+counters"
		if withRun {
			name = "with-run-metrics"
		}
		b.Run(name, func(b *testing.B) {
			m := newCostMetrics()
			prometheus.NewRegistry().MustRegister(m.collectors()...)
			acc := convmetrics.New("conv", time.Now())
			b.ReportAllocs()
			for b.Loop() {
				usd, known := pricing.Cost(meta, u)
				m.record("tenant-a", meta, pricing.Split(u), usd, known)
				if withRun {
					acc.RecordModelCall("gpt-4o-2024-08-06", u, usd, known)
				}
			}
		})
	}
}
