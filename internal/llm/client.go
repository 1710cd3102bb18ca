package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/baagent/baagent/internal/metrics"
	"github.com/baagent/baagent/internal/tracing"
)

// Model is what the orchestrator needs from a model: one streaming chat
// call. *Client implements it.
type Model interface {
	// Chat sends req and streams the answer to onDelta (which may be nil),
	// returning the assembled assistant message. Errors are *Error, except
	// an error returned by onDelta, which is returned as is (wrapped).
	Chat(ctx context.Context, req Request, onDelta DeltaFunc) (*Response, error)
}

// Request is one chat call.
type Request struct {
	// Model overrides Config.Model (a skill's context modifier may do so).
	Model string
	// Messages is the conversation, oldest first.
	Messages []Message
	// Tools the model may call; empty offers none.
	Tools []Tool
	// ToolChoice is "", "auto", "none", "required", or a tool name to force.
	ToolChoice string
	// Options override the per-model options for this call, field by field.
	Options *Options
	// User is an opaque end-user id some providers use for abuse detection.
	User string
}

// Response is a finished call.
type Response struct {
	// Message is the assistant message (Role is RoleAssistant).
	Message Message
	// FinishReason is why the model stopped: FinishStop, FinishToolCalls,
	// FinishLength, FinishContentFilter, or what the endpoint said.
	FinishReason string
	// Usage is what the endpoint reported; UsageReported is false when it
	// reported nothing (the counts are then zero).
	Usage         Usage
	UsageReported bool
	// ID and Model are the endpoint's completion id and model name.
	ID    string
	Model string
	// Attempts is the number of requests made (1 without retries).
	Attempts int
	// Duration is the whole call; FirstDelta the time to the first delta of
	// the successful attempt (streaming only).
	Duration   time.Duration
	FirstDelta time.Duration
}

// Client calls one OpenAI-compatible endpoint. It is safe for concurrent use.
type Client struct {
	cfg     Config
	api     *openai.Client
	log     *slog.Logger
	metrics *clientMetrics
	tracer  trace.Tracer // nil without tracing

	// Replaceable in tests.
	rand  func() float64
	sleep func(context.Context, time.Duration) error
	now   func() time.Time
}

var _ Model = (*Client)(nil)

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.FirstByteTimeout == 0 {
		cfg.FirstByteTimeout = DefaultFirstByteTimeout
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	cfg.Retry = cfg.Retry.withDefaults()
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: defaultTransport()}
	}
	var tracer trace.Tracer
	if tracing.Enabled(cfg.TracerProvider) {
		tracer = cfg.TracerProvider.Tracer(tracerName)
		traced := *hc
		base := traced.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		traced.Transport = otelhttp.NewTransport(base,
			otelhttp.WithTracerProvider(cfg.TracerProvider),
			otelhttp.WithPropagators(tracing.Propagator()),
			otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))
		hc = &traced
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	oc.HTTPClient = headerDoer{client: hc}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newClientMetrics(cfg.Registerer, metricModels(cfg))
	if err != nil {
		return nil, err
	}
	return &Client{
		cfg: cfg, api: openai.NewClientWithConfig(oc), log: log.With("component", "llm"), metrics: m, tracer: tracer,
		rand: defaultRand, sleep: sleepCtx, now: time.Now,
	}, nil
}

// metricModels are the models the metrics name: the configured ones. A
// request names its model freely (from a client's run spec), so nothing
// learnt from requests may widen the set.
func metricModels(cfg Config) metrics.LabelSet {
	names := append([]string{cfg.Model}, cfg.MetricModels...)
	for name := range cfg.Models {
		names = append(names, name)
	}
	return metrics.NewLabelSet(names...)
}

// DefaultModel is Config.Model.
func (c *Client) DefaultModel() string { return c.cfg.Model }

func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	t.MaxIdleConnsPerHost = 32
	return t
}

// Chat implements Model: a streaming call with retries before the first
// delta.
func (c *Client) Chat(ctx context.Context, req Request, onDelta DeltaFunc) (*Response, error) {
	return c.call(ctx, req, true, onDelta)
}

// Complete is the non-streaming call: the same request and retries, the
// answer in one piece (no deltas).
func (c *Client) Complete(ctx context.Context, req Request) (*Response, error) {
	return c.call(ctx, req, false, nil)
}

func (c *Client) call(ctx context.Context, req Request, stream bool, onDelta DeltaFunc) (resp *Response, err error) {
	start := c.now()
	model := req.Model
	if model == "" {
		model = c.cfg.Model
	}
	if c.tracer != nil {
		var span trace.Span
		ctx, span = c.startSpan(ctx, model, stream)
		defer func() { endSpan(span, resp, err) }()
	}
	wire, err := c.wireRequest(model, req, stream)
	if err != nil {
		e := &Error{Kind: KindBadRequest, Model: model, Message: err.Error(), Err: err}
		c.metrics.observe(ctx, model, e.Kind.String(), c.now().Sub(start))
		return nil, e
	}
	var last *Error
	for attempt := 1; ; attempt++ {
		var delivered int
		if stream {
			resp, delivered, err = c.streamOnce(ctx, wire, onDelta, start)
		} else {
			resp, err = c.completeOnce(ctx, wire)
		}
		if err == nil {
			resp.Attempts = attempt
			resp.Duration = c.now().Sub(start)
			c.metrics.observe(ctx, model, "ok", resp.Duration)
			c.metrics.tokens(model, resp.Usage)
			return resp, nil
		}
		var cbErr *callbackError
		if errors.As(err, &cbErr) {
			c.metrics.observe(ctx, model, KindCanceled.String(), c.now().Sub(start))
			return nil, fmt.Errorf("llm: stream stopped by the caller: %w", cbErr.err)
		}
		if !errors.As(err, &last) {
			last = &Error{Kind: KindUnknown, Err: err}
		}
		last.Model, last.Attempts = model, attempt
		last.redact(c.cfg.APIKey)
		if delivered > 0 && last.Kind != KindCanceled {
			last = &Error{Kind: KindInterrupted, Model: model, Attempts: attempt, StatusCode: last.StatusCode,
				Message: fmt.Sprintf("the stream failed after %d deltas (%s); it is not retried", delivered, last.Error()), Err: last}
			last.redact(c.cfg.APIKey)
		}
		wait, ok := c.retryWait(ctx, last, attempt)
		if !ok {
			break
		}
		c.metrics.retry(model, last.Kind.String())
		if c.tracer != nil {
			trace.SpanFromContext(ctx).AddEvent("retry", trace.WithAttributes(
				attribute.Int("attempt", attempt), attribute.String("error.type", last.Kind.String())))
		}
		c.log.WarnContext(ctx, "model call failed; retrying", "model", model, "attempt", attempt, "error", last.Error(), "wait", wait)
		if err := c.sleep(ctx, wait); err != nil {
			last = &Error{Kind: KindCanceled, Model: model, Attempts: attempt, Message: "the call was cancelled", Err: err}
			break
		}
	}
	c.metrics.observe(ctx, model, last.Kind.String(), c.now().Sub(start))
	return nil, last
}

// retryWait decides whether to retry after attempt failed with e, and how
// long to wait first.
func (c *Client) retryWait(ctx context.Context, e *Error, attempt int) (time.Duration, bool) {
	p := c.cfg.Retry
	if !e.Retryable() || attempt >= p.MaxAttempts || ctx.Err() != nil {
		return 0, false
	}
	wait := backoff(p, attempt, c.rand)
	if e.RetryAfter > 0 {
		if e.RetryAfter > p.MaxRetryAfter {
			return 0, false
		}
		wait = e.RetryAfter
	}
	if dl, ok := ctx.Deadline(); ok && c.now().Add(wait).After(dl) {
		return 0, false
	}
	return wait, true
}

// streamOnce makes one streaming attempt. delivered is the number of deltas
// passed to onDelta before it failed.
func (c *Client) streamOnce(ctx context.Context, wire openai.ChatCompletionRequest, onDelta DeltaFunc, callStart time.Time) (*Response, int, error) {
	info := &attemptInfo{}
	actx, cancel := context.WithCancelCause(context.WithValue(ctx, attemptInfoKey{}, info))
	defer cancel(nil)
	// The watchdog cancels the attempt when the endpoint stalls: first for
	// the headers and first chunk, then between chunks.
	watchdog := time.AfterFunc(c.cfg.FirstByteTimeout, func() { cancel(errStalled) })
	defer watchdog.Stop()

	s, err := c.api.CreateChatCompletionStream(actx, wire)
	if err != nil {
		return nil, 0, classify(ctx, actx, err, info.get())
	}
	defer s.Close()

	var asm assembler
	var firstDelta time.Duration
	emit := func(d Delta) error {
		if asm.delivered == 1 {
			firstDelta = c.now().Sub(callStart)
		}
		if onDelta != nil {
			return onDelta(d)
		}
		return nil
	}
	for {
		// Chunks already buffered would still be read after the caller
		// cancels; stop delivering them.
		if err := ctx.Err(); err != nil {
			return nil, asm.delivered, classify(ctx, actx, err, info.get())
		}
		raw, err := s.RecvRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if asm.finish != "" && ctx.Err() == nil {
				// The message is complete; only the usage chunk was lost.
				c.log.WarnContext(ctx, "stream broke after the finish reason; usage unknown", "error", err)
				break
			}
			return nil, asm.delivered, classify(ctx, actx, err, info.get())
		}
		watchdog.Reset(c.cfg.IdleTimeout)
		if err := asm.addRaw(raw, emit); err != nil {
			var e *Error
			if errors.As(err, &e) {
				return nil, asm.delivered, e
			}
			return nil, asm.delivered, err
		}
	}
	if asm.finish == "" {
		return nil, asm.delivered, &Error{Kind: KindConnection, Message: "the stream ended without a finish reason"}
	}
	if firstDelta > 0 {
		c.metrics.firstDeltaObserve(wire.Model, firstDelta)
	}
	return &Response{
		Message: asm.message(), FinishReason: asm.finish,
		Usage: usageOf(asm.usage), UsageReported: asm.usage != nil,
		ID: asm.id, Model: asm.model, FirstDelta: firstDelta,
	}, asm.delivered, nil
}

// completeOnce makes one non-streaming attempt.
func (c *Client) completeOnce(ctx context.Context, wire openai.ChatCompletionRequest) (*Response, error) {
	info := &attemptInfo{}
	actx, cancel := context.WithCancelCause(context.WithValue(ctx, attemptInfoKey{}, info))
	defer cancel(nil)
	watchdog := time.AfterFunc(c.cfg.FirstByteTimeout, func() { cancel(errStalled) })
	defer watchdog.Stop()

	r, err := c.api.CreateChatCompletion(actx, wire)
	if err != nil {
		return nil, classify(ctx, actx, err, info.get())
	}
	if len(r.Choices) == 0 {
		return nil, &Error{Kind: KindProtocol, Message: "the response has no choices"}
	}
	ch := r.Choices[0]
	m := Message{Role: RoleAssistant, Content: ch.Message.Content, ReasoningContent: ch.Message.ReasoningContent}
	if len(ch.Message.ToolCalls) > MaxToolCalls {
		return nil, &Error{Kind: KindProtocol, Message: fmt.Sprintf("the response has %d tool calls, more than %d", len(ch.Message.ToolCalls), MaxToolCalls)}
	}
	for i, tc := range ch.Message.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	u := r.Usage
	return &Response{
		Message: m, FinishReason: string(ch.FinishReason),
		Usage: usageOf(&u), UsageReported: u.TotalTokens > 0 || u.PromptTokens > 0,
		ID: r.ID, Model: r.Model,
	}, nil
}

// wireRequest builds the go-openai request, validating the messages so that
// a malformed conversation fails here with the field named.
func (c *Client) wireRequest(model string, req Request, stream bool) (openai.ChatCompletionRequest, error) {
	opts := c.cfg.Defaults
	if o, ok := c.cfg.Models[model]; ok {
		opts = opts.merge(o)
	}
	if req.Options != nil {
		if err := req.Options.validate("options"); err != nil {
			return openai.ChatCompletionRequest{}, err
		}
		opts = opts.merge(*req.Options)
	}
	if len(req.Messages) == 0 {
		return openai.ChatCompletionRequest{}, errors.New("messages: at least one message is required")
	}
	w := openai.ChatCompletionRequest{
		Model:               model,
		Messages:            make([]openai.ChatCompletionMessage, 0, len(req.Messages)),
		MaxTokens:           opts.MaxTokens, //nolint:staticcheck // many OpenAI-compatible servers know only max_tokens; callers pick
		MaxCompletionTokens: opts.MaxCompletionTokens,
		Seed:                opts.Seed,
		Stop:                opts.Stop,
		ReasoningEffort:     opts.ReasoningEffort,
		User:                req.User,
		Stream:              stream,
	}
	// go-openai omits a zero temperature; the smallest positive float32
	// encodes as 1e-45, which every server treats as greedy decoding.
	if t := opts.Temperature; t != nil {
		w.Temperature = *t
		if *t == 0 {
			w.Temperature = math.SmallestNonzeroFloat32
		}
	}
	if p := opts.TopP; p != nil {
		w.TopP = *p
		if *p == 0 {
			w.TopP = math.SmallestNonzeroFloat32
		}
	}
	if stream && (opts.IncludeUsage == nil || *opts.IncludeUsage) {
		w.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	for i, m := range req.Messages {
		wm, err := wireMessage(m)
		if err != nil {
			return openai.ChatCompletionRequest{}, fmt.Errorf("messages[%d]: %w", i, err)
		}
		w.Messages = append(w.Messages, wm)
	}
	for i, t := range req.Tools {
		if t.Name == "" {
			return openai.ChatCompletionRequest{}, fmt.Errorf("tools[%d].name: required", i)
		}
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !json.Valid(params) {
			return openai.ChatCompletionRequest{}, fmt.Errorf("tools[%d].parameters: not valid JSON", i)
		}
		w.Tools = append(w.Tools, openai.Tool{Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	if len(w.Tools) > 0 && opts.ParallelToolCalls != nil {
		w.ParallelToolCalls = *opts.ParallelToolCalls
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		w.ToolChoice = req.ToolChoice
	default:
		w.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: req.ToolChoice}}
	}
	return w, nil
}

func wireMessage(m Message) (openai.ChatCompletionMessage, error) {
	w := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, Name: m.Name}
	switch m.Role {
	case RoleSystem, RoleUser:
	case RoleAssistant:
		for j, tc := range m.ToolCalls {
			if tc.ID == "" || tc.Name == "" {
				return w, fmt.Errorf("tool_calls[%d]: id and name are required", j)
			}
			args := tc.Arguments
			if args == "" {
				// go-openai omits an empty string, and the API requires the field.
				args = "{}"
			}
			w.ToolCalls = append(w.ToolCalls, openai.ToolCall{ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: args}})
		}
	case RoleTool:
		if m.ToolCallID == "" {
			return w, errors.New("tool_call_id: required for a tool message")
		}
		w.ToolCallID = m.ToolCallID
	default:
		return w, fmt.Errorf("role: %q is not system, user, assistant or tool", m.Role)
	}
	return w, nil
}
