package tracing

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func noEnv(string) string { return "" }

func TestSamplingRatios(t *testing.T) {
	for level, want := range map[string]float64{"always": 1, "HIGH": 0.5, "medium": 0.1, "low": 0.01, "never": 0} {
		if got, err := SamplingRatio(level); err != nil || got != want {
			t.Errorf("SamplingRatio(%q) = %v, %v; want %v", level, got, err, want)
		}
	}
	if _, err := SamplingRatio("0.5"); err == nil {
		t.Error("a number is not a level")
	}
}

// Without an endpoint (flag or OTEL_* environment) tracing is off: a no-op
// provider that instrumentation recognises.
func TestSetupOffByDefault(t *testing.T) {
	tp, shutdown, err := Setup(context.Background(), Config{Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if Enabled(tp) || Enabled(nil) {
		t.Error("tracing on without an endpoint")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	// The OTEL_* environment alone turns it on.
	tp, shutdown, err = Setup(context.Background(), Config{Getenv: func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return "http://127.0.0.1:1"
		}
		return ""
	}})
	if err != nil || !Enabled(tp) {
		t.Fatalf("OTEL_EXPORTER_OTLP_ENDPOINT: enabled %v, err %v", Enabled(tp), err)
	}
	_ = shutdown(context.Background())
}

// Both OTLP protocols build an exporter from host:port or a URL without
// connecting (an exporter connects lazily).
func TestSetupExporters(t *testing.T) {
	for _, c := range []Config{
		{Endpoint: "127.0.0.1:1", Protocol: ProtocolGRPC, Insecure: true, Headers: map[string]string{"k": "v"}},
		{Endpoint: "http://127.0.0.1:1", Protocol: ProtocolGRPC},
		{Endpoint: "127.0.0.1:1", Protocol: ProtocolHTTP, Insecure: true},
		{Endpoint: "http://127.0.0.1:1", Protocol: ProtocolHTTP},
		{Endpoint: "127.0.0.1:1"}, // the protocol from the environment, else grpc
	} {
		c.Getenv = noEnv
		tp, shutdown, err := Setup(context.Background(), c)
		if err != nil || !Enabled(tp) {
			t.Errorf("%+v: enabled %v, err %v", c, Enabled(tp), err)
			continue
		}
		_ = shutdown(context.Background())
	}
	if _, _, err := Setup(context.Background(), Config{Endpoint: "127.0.0.1:1", Protocol: "thrift", Getenv: noEnv}); err == nil {
		t.Error("unknown protocol accepted")
	}
}

// The sampler is parent-based: a child follows its parent's decision, so a
// run is traced whole or not at all; the resource names the service.
func TestSetupSamplerAndResource(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp, shutdown, err := Setup(context.Background(), Config{Exporter: exp, Sync: true, Sampling: SamplingNever,
		ServiceName: "baagent-orchestrator", Environment: "staging", Tags: map[string]string{"region": "eu"}, Getenv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	tr := tp.Tracer("t")
	_, s := tr.Start(context.Background(), "root")
	s.End()
	if len(exp.GetSpans()) != 0 {
		t.Fatal("never sampled a root")
	}
	// A sampled remote parent (another process decided) wins.
	parent := WithTraceParent(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	_, c := tr.Start(parent, "child")
	c.End()
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("spans %v", spans)
	}
	res := map[attribute.Key]string{}
	for _, kv := range spans[0].Resource.Attributes() {
		res[kv.Key] = kv.Value.String()
	}
	if res["service.name"] != "baagent-orchestrator" || res["deployment.environment"] != "staging" || res["region"] != "eu" {
		t.Errorf("resource %v", res)
	}
}

// A span context survives a trip through NATS headers; untraced work adds
// no header.
func TestNATSHeaders(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp, shutdown, _ := Setup(context.Background(), Config{Exporter: exp, Sync: true, Getenv: noEnv})
	defer shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "publish")
	defer span.End()

	msg := &nats.Msg{Subject: "x"}
	Inject(context.Background(), msg)
	if msg.Header != nil {
		t.Errorf("untraced message got headers %v", msg.Header)
	}
	Inject(ctx, msg)
	got := trace.SpanContextFromContext(Extract(context.Background(), msg.Header))
	if !got.IsRemote() || got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() || !got.IsSampled() {
		t.Errorf("extracted %v, want %v", got, span.SpanContext())
	}
	if TraceID(ctx) != span.SpanContext().TraceID().String() || TraceID(context.Background()) != "" {
		t.Error("TraceID")
	}
	tp2 := TraceParent(ctx)
	if sc := SpanContextOf(tp2); sc.SpanID() != span.SpanContext().SpanID() {
		t.Errorf("TraceParent %q round trip: %v", tp2, sc)
	}
	if SpanContextOf("garbage").IsValid() || TraceParent(context.Background()) != "" {
		t.Error("malformed or missing traceparent")
	}
}
