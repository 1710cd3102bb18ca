package metrics

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"
)

// A histogram observed in a sampled span's context carries its trace id as
// the exemplar; outside one, or unsampled, it carries none.
func TestObserveWithExemplar(t *testing.T) {
	t.Parallel()

	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: []float64{1}})
	sampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
	unsampled := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}}))
	Observe(context.Background(), h, 2)
	Observe(unsampled, h, 2)
	var m dto.Metric
	_ = h.Write(&m)
	for _, b := range m.GetHistogram().GetBucket() {
		if b.GetExemplar() != nil {
			t.Fatalf("exemplar without a sampled span: %v", b.GetExemplar())
		}
	}
	Observe(sampled, h, 0.5)
	m.Reset()
	_ = h.Write(&m)
	ex := m.GetHistogram().GetBucket()[0].GetExemplar()
	want := trace.TraceID{1}.String()
	found := false
	for _, l := range ex.GetLabel() {
		found = found || (l.GetName() == "trace_id" && l.GetValue() == want)
	}
	if ex == nil || !found {
		t.Fatalf("exemplar %v, want trace_id %s", ex, want)
	}
	if m.GetHistogram().GetSampleCount() != 3 {
		t.Errorf("count %d", m.GetHistogram().GetSampleCount())
	}
}
