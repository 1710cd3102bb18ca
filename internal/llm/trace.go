package llm

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

const tracerName = "github.com/baagent/baagent/internal/llm"

// startSpan starts a model call's span, named and attributed after the
// OpenTelemetry GenAI semantic conventions ("chat <model>").
func (c *Client) startSpan(ctx context.Context, model string, stream bool) (context.Context, trace.Span) {
	return c.tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", "openai"),
			attribute.String("gen_ai.system", "openai"),
			attribute.String("gen_ai.request.model", model),
			attribute.Bool("gen_ai.request.stream", stream),
		))
}

// endSpan records a call's outcome on its span and ends it.
func endSpan(span trace.Span, resp *Response, err error) {
	defer span.End()
	if err != nil {
		kind := KindUnknown.String()
		var e *Error
		if errors.As(err, &e) {
			kind = e.Kind.String()
			span.SetAttributes(attribute.Int("baagent.llm.attempts", e.Attempts))
			if e.StatusCode != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", e.StatusCode))
			}
		}
		span.SetAttributes(attribute.String("error.type", kind))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.response.model", resp.Model),
		attribute.String("gen_ai.response.id", resp.ID),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{resp.FinishReason}),
		attribute.Int("baagent.llm.attempts", resp.Attempts),
	}
	if resp.UsageReported {
		attrs = append(attrs,
			attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.PromptTokens),
			attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.CompletionTokens))
	}
	if resp.FirstDelta > 0 {
		attrs = append(attrs, attribute.Float64("baagent.llm.time_to_first_delta_ms", float64(resp.FirstDelta.Microseconds())/1000))
	}
	span.SetAttributes(attrs...)
}
