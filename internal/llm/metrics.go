package llm

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baagent/baagent/internal/metrics"
)

// clientMetrics are the model-call metrics; a nil *clientMetrics records
// nothing.
type clientMetrics struct {
	// models bounds the model label: a request may name any model.
	models     metrics.LabelSet
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	firstDelta *prometheus.HistogramVec
	retries    *prometheus.CounterVec
	tokensVec  *prometheus.CounterVec
}

// newClientMetrics registers the metrics on reg, the model label bounded to
// models (and "other").
func newClientMetrics(reg prometheus.Registerer, models metrics.LabelSet) (*clientMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	buckets := []float64{.05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120, 300}
	m := &clientMetrics{models: models}
	var err error
	if m.requests, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baagent_llm_requests_total", Help: "Model calls by outcome (ok or the failure kind).",
	}, []string{"model", "outcome"})); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "baagent_llm_request_duration_seconds", Help: "Duration of model calls, retries included.", Buckets: buckets,
	}, []string{"model", "outcome"})); err != nil {
		return nil, err
	}
	if m.firstDelta, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "baagent_llm_time_to_first_delta_seconds", Help: "Time from a streaming call's start to its first delta.", Buckets: buckets,
	}, []string{"model"})); err != nil {
		return nil, err
	}
	if m.retries, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baagent_llm_retries_total", Help: "Model call attempts retried, by the failure that caused the retry.",
	}, []string{"model", "reason"})); err != nil {
		return nil, err
	}
	if m.tokensVec, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baagent_llm_tokens_total", Help: "Tokens reported by the endpoint, by direction (prompt, completion).",
	}, []string{"model", "direction"})); err != nil {
		return nil, err
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	c, err := metrics.RegisterShared(reg, c)
	if err != nil {
		return c, fmt.Errorf("llm: %w", err)
	}
	return c, nil
}

func (m *clientMetrics) observe(ctx context.Context, model, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	model = m.models.Value(model)
	m.requests.WithLabelValues(model, outcome).Inc()
	metrics.Observe(ctx, m.duration.WithLabelValues(model, outcome), d.Seconds())
}

func (m *clientMetrics) firstDeltaObserve(model string, d time.Duration) {
	if m == nil {
		return
	}
	m.firstDelta.WithLabelValues(m.models.Value(model)).Observe(d.Seconds())
}

func (m *clientMetrics) retry(model, reason string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(m.models.Value(model), reason).Inc()
}

func (m *clientMetrics) tokens(model string, u Usage) {
	if m == nil {
		return
	}
	model = m.models.Value(model)
	m.tokensVec.WithLabelValues(model, "prompt").Add(float64(u.PromptTokens))
	m.tokensVec.WithLabelValues(model, "completion").Add(float64(u.CompletionTokens))
}
