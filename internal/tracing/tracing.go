// Package tracing is the OpenTelemetry plumbing of the suite: it builds the
// tracer provider a process passes to its services (OTLP export over gRPC or
// HTTP, gzip, a batch processor, a parent-based ratio sampler), the W3C
// propagator, and carries span contexts through NATS message headers. It
// holds no business logic and no global state: the provider is passed
// explicitly (Options.TracerProvider) to whatever creates spans, and the
// process never calls otel.SetTracerProvider.
//
// Tracing is off unless an endpoint is configured (or an exporter is given,
// in tests): then Setup returns a no-op provider, and the instrumentation
// that asks Enabled installs nothing, so it costs nothing.
package tracing

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
)

// ExportGzipLevel is the gzip level of OTLP/gRPC exports. The exporter
// compresses with the "gzip" compressor registered in grpc, at gzip's
// default level (6) unless told otherwise; in BenchmarkReActStepTracing's
// profile that compression was about half of the CPU of an export. Level 1
// (BestSpeed) is still gzip on the wire (any receiver decodes it) for a
// little less compression of span batches. grpc's SetLevel applies to
// every gzip-compressed gRPC call of the process and must be called at
// init: the suite compresses no gRPC traffic other than span exports.
// (OTLP/HTTP compresses with its own gzip writer, at the default level.)
const ExportGzipLevel = gzip.BestSpeed

func init() {
	if err := grpcgzip.SetLevel(ExportGzipLevel); err != nil {
		panic(err)
	}
}

// Protocols of the OTLP exporter.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http"
)

// Sampling levels and the share of runs (root spans) each keeps.
const (
	SamplingAlways = "always"
	SamplingHigh   = "high"
	SamplingMedium = "medium"
	SamplingLow    = "low"
	SamplingNever  = "never"
)

// SamplingLevels lists the level names, for flag help and errors.
const SamplingLevels = "always|high|medium|low|never"

// Defaults of Config.
const (
	DefaultExportTimeout = 5 * time.Second
	DefaultBatchSize     = 100
)

// SamplingRatio returns the ratio of a sampling level: always 1, high 0.5,
// medium 0.1, low 0.01, never 0.
func SamplingRatio(level string) (float64, error) {
	switch strings.ToLower(strings.TrimSpace(level)) {
	case SamplingAlways:
		return 1, nil
	case SamplingHigh:
		return 0.5, nil
	case SamplingMedium:
		return 0.1, nil
	case SamplingLow:
		return 0.01, nil
	case SamplingNever:
		return 0, nil
	}
	return 0, fmt.Errorf("unknown sampling level %q: want one of %s", level, SamplingLevels)
}

// Config configures Setup. The zero value is tracing off.
type Config struct {
	// Endpoint is where spans are exported: host:port (plaintext only
	// with Insecure) or an http(s):// URL (for HTTP, the path defaults to
	// /v1/traces). Empty: the exporter's OTEL_EXPORTER_OTLP_* environment
	// decides, and without those tracing is off.
	Endpoint string
	// Protocol is ProtocolGRPC or ProtocolHTTP; empty reads
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL,
	// else gRPC.
	Protocol string
	// Headers are sent with every export (e.g. an API key).
	Headers map[string]string
	// Insecure exports without TLS to a host:port endpoint.
	Insecure bool
	// Sampling is a level name (SamplingAlways…); empty is always.
	Sampling string
	// ExportTimeout bounds one export (default 5 s); BatchSize is the
	// batch processor's largest export batch (default 100).
	ExportTimeout time.Duration
	BatchSize     int
	// ServiceName, Environment and Tags describe the process (resource
	// attributes service.name, deployment.environment and the tags).
	ServiceName string
	Environment string
	Tags        map[string]string

	// Exporter replaces the OTLP exporter (tests and benchmarks); it turns
	// tracing on without an endpoint. Sync exports every span as it ends
	// instead of in batches (tests).
	Exporter sdktrace.SpanExporter
	Sync     bool
	// Getenv reads the OTEL_* environment (nil: os.Getenv).
	Getenv func(string) string
}

// on reports whether c turns tracing on.
func (c Config) on() bool {
	if c.Exporter != nil || c.Endpoint != "" {
		return true
	}
	getenv := c.getenv()
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

func (c Config) getenv() func(string) string {
	if c.Getenv != nil {
		return c.Getenv
	}
	return os.Getenv
}

// Shutdown flushes the spans still buffered and stops the exporter.
type Shutdown func(context.Context) error

// Setup builds the process's tracer provider. With tracing off it returns a
// no-op provider and a no-op shutdown. The shutdown flushes what the batch
// processor holds: call it after the services have stopped.
func Setup(ctx context.Context, c Config) (trace.TracerProvider, Shutdown, error) {
	if !c.on() {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	level := c.Sampling
	if level == "" {
		level = SamplingAlways
	}
	ratio, err := SamplingRatio(level)
	if err != nil {
		return nil, nil, err
	}
	if c.ExportTimeout <= 0 {
		c.ExportTimeout = DefaultExportTimeout
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	exp := c.Exporter
	if exp == nil {
		if exp, err = newExporter(ctx, c); err != nil {
			return nil, nil, err
		}
	}
	res, err := newResource(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	}
	if c.Sync {
		opts = append(opts, sdktrace.WithSyncer(exp))
	} else {
		opts = append(opts, sdktrace.WithBatcher(exp,
			sdktrace.WithMaxExportBatchSize(c.BatchSize),
			sdktrace.WithMaxQueueSize(max(2048, 4*c.BatchSize)),
			sdktrace.WithExportTimeout(c.ExportTimeout)))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return tp, tp.Shutdown, nil
}

// newExporter builds the OTLP exporter. Options given here win over the
// OTEL_EXPORTER_OTLP_* environment the exporters read themselves.
func newExporter(ctx context.Context, c Config) (sdktrace.SpanExporter, error) {
	proto := c.Protocol
	if proto == "" {
		getenv := c.getenv()
		p := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if p == "" {
			p = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		if strings.HasPrefix(p, "http") {
			proto = ProtocolHTTP
		} else {
			proto = ProtocolGRPC
		}
	}
	hasURL := strings.Contains(c.Endpoint, "://")
	switch proto {
	case ProtocolGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithCompressor("gzip"), otlptracegrpc.WithTimeout(c.ExportTimeout)}
		switch {
		case hasURL:
			opts = append(opts, otlptracegrpc.WithEndpointURL(c.Endpoint))
		case c.Endpoint != "":
			opts = append(opts, otlptracegrpc.WithEndpoint(c.Endpoint))
		}
		if c.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(c.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(c.Headers))
		}
		return otlptrace.New(ctx, otlptracegrpc.NewClient(opts...))
	case ProtocolHTTP:
		opts := []otlptracehttp.Option{otlptracehttp.WithCompression(otlptracehttp.GzipCompression), otlptracehttp.WithTimeout(c.ExportTimeout)}
		switch {
		case hasURL:
			u, err := url.Parse(c.Endpoint)
			if err != nil {
				return nil, fmt.Errorf("otlp endpoint: %w", err)
			}
			if u.Path == "" || u.Path == "/" {
				u.Path = "/v1/traces"
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
		case c.Endpoint != "":
			opts = append(opts, otlptracehttp.WithEndpoint(c.Endpoint))
		}
		if c.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(c.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(c.Headers))
		}
		return otlptrace.New(ctx, otlptracehttp.NewClient(opts...))
	}
	return nil, fmt.Errorf("unknown OTLP protocol %q: want %s or %s", proto, ProtocolGRPC, ProtocolHTTP)
}

// newResource describes the process: OTEL_RESOURCE_ATTRIBUTES and
// OTEL_SERVICE_NAME first, then the configured name, environment and tags,
// which win.
func newResource(ctx context.Context, c Config) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{}
	if c.ServiceName != "" {
		attrs = append(attrs, attribute.String("service.name", c.ServiceName))
	}
	if c.Environment != "" {
		attrs = append(attrs, attribute.String("deployment.environment", c.Environment),
			attribute.String("deployment.environment.name", c.Environment))
	}
	keys := make([]string, 0, len(c.Tags))
	for k := range c.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		attrs = append(attrs, attribute.String(k, c.Tags[k]))
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
		resource.WithAttributes(attrs...))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return res, nil
}

// Enabled reports whether tp records anything: false for nil and the no-op
// provider, so instrumentation can skip installing itself.
func Enabled(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, isNoop := tp.(noop.TracerProvider)
	return !isNoop
}

// OrNoop returns tp, or the no-op provider for nil.
func OrNoop(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return noop.NewTracerProvider()
	}
	return tp
}

// propagator is stateless; one value serves every caller.
var propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Propagator is W3C trace context and baggage.
func Propagator() propagation.TextMapPropagator { return propagator }

// TraceID returns the trace id of ctx's span when it is sampled (the runs
// a tracing backend holds), else "".
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// TraceParent returns the W3C traceparent of ctx's span, or "" without a
// valid span context.
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceParent returns ctx with the remote span context of a W3C
// traceparent as parent; an empty or malformed one leaves ctx as it is.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// SpanContextOf parses a W3C traceparent (an invalid SpanContext if it is
// empty or malformed), e.g. for a link to another execution's span.
func SpanContextOf(traceparent string) trace.SpanContext {
	return trace.SpanContextFromContext(WithTraceParent(context.Background(), traceparent))
}
