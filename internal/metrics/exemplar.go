package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Observe records v on o, with the trace id of ctx's span as the
// observation's exemplar when the span is sampled and o supports exemplars
// (histograms do), so a latency bucket on a dashboard leads to a trace.
// Without a sampled span it is a plain Observe.
func Observe(ctx context.Context, o prometheus.Observer, v float64) {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
			if eo, ok := o.(prometheus.ExemplarObserver); ok {
				eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()})
				return
			}
		}
	}
	o.Observe(v)
}
