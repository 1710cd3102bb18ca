package tracing

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderCarrier carries a span context in NATS message headers (the W3C
// traceparent, tracestate and baggage keys, verbatim: NATS headers are
// case-sensitive).
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key.
func (h HeaderCarrier) Get(key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set replaces key's values with value.
func (h HeaderCarrier) Set(key, value string) { h[key] = []string{value} }

// Keys lists the keys present.
func (h HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes ctx's span context (and baggage) into msg's headers,
// creating them if needed. Without a valid span context it writes nothing,
// so messages of untraced work carry no extra bytes.
func Inject(ctx context.Context, msg *nats.Msg) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	propagator.Inject(ctx, HeaderCarrier(msg.Header))
}

// Extract returns ctx with the span context msg's headers carry as its
// remote parent (ctx unchanged when they carry none).
func Extract(ctx context.Context, h nats.Header) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, HeaderCarrier(h))
}
