package orchestrator

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/tracing"
	"github.com/baagent/baagent/services/orchestrator/internal/checkpoint"
)

// Tracing. A run is one trace: StartRun's span (the gRPC server span) is
// the parent of every execution of the run, whichever replica executes it,
// because its context travels in the work item's NATS headers (and wake
// keeps them when it replaces the item). An execution is a "run" span;
// its children are the steps, and a step's children the context window,
// the model call (internal/llm), the tool calls and skill activations, with
// the gRPC spans of the peers below them. The sampling decision is taken
// once, at StartRun's root, and every span of the run inherits it
// (ParentBased), so a run is traced whole or not at all. A resumed
// execution links to the span of the one that wrote its checkpoint (a
// replica that died, or the execution that paused for input). Events carry
// the run's trace id and, in their headers, the execution's span context.

const tracerName = "github.com/baagent/baagent/services/orchestrator"

// noSpan is the span of untraced work: every method is a no-op.
var noSpan = trace.SpanFromContext(context.Background())

// span starts a span when tracing is on; otherwise it returns ctx and
// noSpan without allocating. Callers set attributes only when
// span.IsRecording().
func (s *Server) span(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, noSpan
	}
	if int(kind) < len(spanKinds) {
		return s.tracer.Start(ctx, name, spanKinds[kind]...)
	}
	return s.tracer.Start(ctx, name, trace.WithSpanKind(kind))
}

// spanKinds are the start options of a span of each kind, built once: a
// span started with them allocates no option slice.
var spanKinds = func() (out [trace.SpanKindConsumer + 1][]trace.SpanStartOption) {
	for k := range out {
		out[k] = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKind(k))}
	}
	return out
}()

// startTrace starts the span of this execution of the run, as a child of
// the span context the work item carries (StartRun's), and makes it the
// run context's span.
func (r *run) startTrace(h nats.Header) {
	if r.s.tracer == nil {
		return
	}
	parent := tracing.Extract(context.Background(), h)
	_, span := r.s.tracer.Start(parent, "run", trace.WithSpanKind(trace.SpanKindConsumer))
	r.span = span
	r.ctx = trace.ContextWithSpan(r.ctx, span)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("baagent.tenant", r.rec.GetTenant()),
		attribute.String("baagent.run_id", r.rec.GetRunId()),
		attribute.String("baagent.conversation_id", r.rec.GetConversationId()),
		attribute.Int("baagent.run.attempt", r.attempt),
		attribute.String("baagent.replica", r.s.opts.Replica),
		attribute.String("gen_ai.request.model", r.rec.GetModel()),
	)
	if p := r.rec.GetParentRunId(); p != "" {
		span.SetAttributes(attribute.String("baagent.parent_run_id", p))
	}
	r.traceparent = tracing.TraceParent(r.ctx)
	r.log = r.log.With("trace_id", span.SpanContext().TraceID().String())
}

// linkPrevious links this execution's span to that of the execution that
// wrote cp, when cp names it.
func (r *run) linkPrevious(cp *checkpoint.State) {
	if r.span == nil || cp == nil || cp.Span == "" || !r.span.IsRecording() {
		return
	}
	sc := tracing.SpanContextOf(cp.Span)
	if !sc.IsValid() {
		return
	}
	r.span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
		attribute.String("baagent.link", "previous_execution"),
		attribute.String("baagent.replica", cp.Owner),
		attribute.Int("baagent.run.attempt", cp.Attempt),
		attribute.String("baagent.checkpoint", cp.Kind),
	}})
	r.span.SetAttributes(attribute.String("baagent.resumed_from", cp.Kind))
}

// endTrace ends the execution's span with how it ended.
func (r *run) endTrace(o outcome) {
	span := r.span
	if span == nil {
		return
	}
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attribute.String("baagent.run.outcome", o.String()),
		attribute.String("baagent.run.state", strings.ToLower(strings.TrimPrefix(r.rec.GetState().String(), "RUN_STATE_"))),
		attribute.Int("baagent.run.steps", int(r.rec.GetStep())),
	)
	if e := r.rec.GetError(); o == outcomeEnded && r.rec.GetState() == baagentv1.RunState_RUN_STATE_FAILED {
		span.SetAttributes(attribute.String("error.type", e.GetCode()))
		span.SetStatus(codes.Error, e.GetMessage())
	}
}

func (o outcome) String() string {
	switch o {
	case outcomeEnded:
		return "ended"
	case outcomeHandedBack:
		return "handed_back"
	case outcomeLost:
		return "lost"
	case outcomeWaiting:
		return "waiting"
	}
	return "unknown"
}

// endSpan records err (if any) on span and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceHeaders are the propagation headers of a work item (traceparent,
// tracestate, baggage), without its JetStream headers.
func traceHeaders(h nats.Header) nats.Header {
	var out nats.Header
	for _, k := range tracing.Propagator().Fields() {
		if v := h[k]; len(v) > 0 {
			if out == nil {
				out = nats.Header{}
			}
			out[k] = v
		}
	}
	return out
}

// toolSpan wraps one tool call on the toolrunner in an "execute_tool"
// span (GenAI semantic conventions) with the outcome's attributes.
func (r *run) toolSpan(ctx context.Context, c *baagentv1.ToolCall, call func(context.Context) (*callResult, error)) (*callResult, error) {
	if r.s.tracer == nil {
		return call(ctx)
	}
	ctx, span := r.s.tracer.Start(ctx, "execute_tool "+c.GetName(), spanKinds[trace.SpanKindInternal]...)
	res, err := call(ctx)
	if !span.IsRecording() {
		endSpan(span, err)
		return res, err
	}
	// The attributes are set when the call returns, those of the call and
	// of its outcome in one slice.
	if res == nil || res.observe == nil {
		span.SetAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", c.GetName()),
			attribute.String("gen_ai.tool.call.id", c.GetId()),
		)
	} else {
		o := res.observe
		span.SetAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", c.GetName()),
			attribute.String("gen_ai.tool.call.id", c.GetId()),
			attribute.Bool("baagent.tool.success", o.GetSuccess()),
			attribute.String("baagent.tool.output_level", strings.ToLower(strings.TrimPrefix(o.GetOutputLevel().String(), "OUTPUT_LEVEL_"))),
			attribute.Bool("baagent.tool.cached", o.GetCached()),
			attribute.Int("baagent.tool.retry_count", int(o.GetRetryCount())),
			attribute.Float64("baagent.tool.duration_ms", o.GetDurationMs()),
		)
		if o.GetArtifactId() != "" {
			span.SetAttributes(attribute.String("baagent.tool.artifact_id", o.GetArtifactId()))
		}
		if !o.GetSuccess() {
			typ := strings.ToLower(strings.TrimPrefix(o.GetErrorType().String(), "TOOL_ERROR_TYPE_"))
			span.SetAttributes(attribute.String("error.type", typ), attribute.String("baagent.tool.error_code", o.GetErrorCode()))
			span.SetStatus(codes.Error, o.GetErrorCode())
		}
	}
	if res != nil && res.approval {
		span.SetAttributes(attribute.Bool("baagent.tool.approval_required", true))
	}
	endSpan(span, err)
	return res, err
}

// windowSpan records a built context window on its span and ends it.
func windowSpan(span trace.Span, model string, win *baagentv1.BuildWindowResponse, err error) {
	if span.IsRecording() && err == nil {
		c := win.GetCompression()
		span.SetAttributes(
			attribute.String("gen_ai.request.model", model),
			attribute.String("baagent.context.strategy", c.GetCompressionStrategy()),
			attribute.Bool("baagent.context.compressed", c.GetWasCompressed()),
			attribute.Int64("baagent.context.tokens_after", c.GetEstimatedTokens()),
			attribute.Int64("baagent.context.token_budget", c.GetTokenBudget()),
			attribute.Int("baagent.context.messages_before", int(c.GetOriginalMessageCount())),
			attribute.Int("baagent.context.messages_after", int(c.GetFinalMessageCount())),
			attribute.Int64("baagent.context.pruned_tokens", c.GetPrunedTokens()),
			attribute.Bool("baagent.context.summary_pending", win.GetSummaryPending()),
		)
	}
	endSpan(span, err)
}
