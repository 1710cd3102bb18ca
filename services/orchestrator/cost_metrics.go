package orchestrator

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/core/pricing"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	basemetrics "github.com/baagent/baagent/internal/metrics"
)

// Bounds of the cost metrics' labels, per replica.
const (
	// maxTenantLabels tenants keep their name as a label; later ones are
	// "other".
	maxTenantLabels = 100
	// maxModelLabels bounds the price-table names used as the model label,
	// in case the tokens service hands out more than its table holds.
	maxModelLabels = 200
)

// Kinds of model tokens, the kind label of baagent_model_tokens_total.
const (
	tokensInput       = "input"
	tokensCachedInput = "cached_input"
	tokensOutput      = "output"
)

// costMetrics are the per-tenant, per-model token and cost counters
// (baagent_model_*). Their labels are bounded: the first maxTenantLabels
// tenants a replica sees keep their name, and the model label is the name
// the model's price is listed under (the tokens service's price table or
// the operator's entry), "other" for an unpriced model.
type costMetrics struct {
	tokens   *prometheus.CounterVec // tenant, model, kind
	cost     *prometheus.CounterVec // tenant, model
	unpriced *prometheus.CounterVec // tenant
	tenants  *firstSeen
	models   *firstSeen
}

func newCostMetrics() *costMetrics {
	return &costMetrics{
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "model", Name: "tokens_total",
			Help: "Model tokens billed, by tenant (the first 100 per replica, then other), priced model (other when unpriced) and kind (input, cached_input, output).",
		}, []string{"tenant", "model", "kind"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "model", Name: "cost_usd_total",
			Help: "Cost of model calls in USD from the models' list prices, by tenant (the first 100 per replica, then other) and priced model. Unpriced calls add nothing.",
		}, []string{"tenant", "model"}),
		unpriced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "baagent", Subsystem: "model", Name: "unpriced_calls_total",
			Help: "Model calls whose cost is unknown (no price, or a prompt beyond the price's tier limit), by tenant (the first 100 per replica, then other).",
		}, []string{"tenant"}),
		tenants: newFirstSeen(maxTenantLabels),
		models:  newFirstSeen(maxModelLabels),
	}
}

func (m *costMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.tokens, m.cost, m.unpriced}
}

// record counts one model call of tenant: its tokens by kind and, when
// known, its cost under the name meta's price is listed under.
func (m *costMetrics) record(tenant string, meta *baagentv1.ModelMetadata, t pricing.Tokens, usd float64, known bool) {
	tl, ml := m.tenants.label(tenant), basemetrics.OtherLabel
	if known {
		ml = m.models.label(meta.GetName())
	}
	m.tokens.WithLabelValues(tl, ml, tokensInput).Add(float64(t.Input))
	m.tokens.WithLabelValues(tl, ml, tokensCachedInput).Add(float64(t.CachedInput))
	m.tokens.WithLabelValues(tl, ml, tokensOutput).Add(float64(t.Output))
	if known {
		m.cost.WithLabelValues(tl, ml).Add(usd)
	} else {
		m.unpriced.WithLabelValues(tl).Inc()
	}
}

// firstSeen bounds a label fed by values the replica meets at run time: the
// first limit distinct values keep their name, every later one is "other".
// Unlike [basemetrics.LabelSet] the set is not known at start-up, but it
// is as bounded. Safe for concurrent use.
type firstSeen struct {
	limit int
	mu    sync.RWMutex
	seen  map[string]struct{}
}

func newFirstSeen(limit int) *firstSeen {
	return &firstSeen{limit: limit, seen: make(map[string]struct{}, limit)}
}

// label is v when v is among the first limit values seen, "other"
// otherwise. The empty string (no value) and "other" itself are "other".
func (f *firstSeen) label(v string) string {
	if v == "" || v == basemetrics.OtherLabel {
		return basemetrics.OtherLabel
	}
	f.mu.RLock()
	_, ok := f.seen[v]
	full := len(f.seen) >= f.limit
	f.mu.RUnlock()
	switch {
	case ok:
		return v
	case full:
		return basemetrics.OtherLabel
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.seen[v]; ok {
		return v
	}
	if len(f.seen) >= f.limit {
		return basemetrics.OtherLabel
	}
	f.seen[v] = struct{}{}
	return v
}
