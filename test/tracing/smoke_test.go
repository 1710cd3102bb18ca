package tracing

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/baagent/baagent/internal/testkit"
)

// The harness on its own, independent of the suite's tracing: the OTel Go
// SDK exports a parent span, its child (linked to a span of another trace)
// and that other span over OTLP gRPC and over OTLP HTTP, and Jaeger's query
// API (v3 and v1) gives back two traces with the parent link, the link,
// the kinds, the attributes and the service name as they were sent.
func TestJaegerRoundTrip(t *testing.T) {
	j := startJaeger(t)
	for _, protocol := range []string{"grpc", "http"} {
		t.Run(protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var exp sdktrace.SpanExporter
			var err error
			switch protocol {
			case "grpc":
				exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(j.OTLPGRPCAddr), otlptracegrpc.WithInsecure())
			case "http":
				exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(j.OTLPHTTPAddr), otlptracehttp.WithInsecure())
			}
			if err != nil {
				t.Fatal(err)
			}
			service := "jaeger-smoke-" + protocol
			tp := sdktrace.NewTracerProvider(
				sdktrace.WithBatcher(exp),
				sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
			)
			tracer := tp.Tracer("github.com/baagent/baagent/test/tracing")
			started := time.Now()

			_, other := tracer.Start(ctx, "smoke.other", trace.WithNewRoot())
			other.End()
			pctx, parent := tracer.Start(ctx, "smoke.parent", trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("smoke.protocol", protocol), attribute.Int("smoke.n", 42)))
			_, child := tracer.Start(pctx, "smoke.child", trace.WithSpanKind(trace.SpanKindClient),
				trace.WithLinks(trace.Link{SpanContext: other.SpanContext()}))
			child.End()
			parent.End()
			// Shutdown exports what the batcher holds.
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatalf("export: %v", err)
			}
			traceID := parent.SpanContext().TraceID().String()
			parentID := parent.SpanContext().SpanID().String()
			childID := child.SpanContext().SpanID().String()
			otherLink := Link{TraceID: other.SpanContext().TraceID().String(), SpanID: other.SpanContext().SpanID().String()}

			// The trace is stored once its export has been answered; poll
			// anyway, the query side owes nothing about timing.
			var tr *Trace
			testkit.EventuallyContext(ctx, t, "both spans of trace "+traceID, func() (bool, string) {
				tr, err = j.GetTrace(ctx, traceID)
				if err != nil {
					return false, err.Error()
				}
				return len(tr.Spans) >= 2, tr.Tree()
			})
			checkSmokeTrace(t, "API v3", tr, service, parentID, childID, otherLink)
			p, _ := tr.Span(parentID)
			if p.Attrs["smoke.protocol"] != protocol || p.Attrs["smoke.n"] != "42" {
				t.Errorf("parent attributes %v, want smoke.protocol=%s smoke.n=42", p.Attrs, protocol)
			}
			if p.Start.Before(started.Add(-time.Second)) || p.End.Before(p.Start) || p.End.After(time.Now().Add(time.Second)) {
				t.Errorf("parent span times %s … %s are not around the test's %s", p.Start, p.End, started)
			}

			v1, err := j.GetTraceV1(ctx, traceID)
			if err != nil {
				t.Fatal(err)
			}
			checkSmokeTrace(t, "API v1", v1, service, parentID, childID, otherLink)

			// Search by service: both traces, each whole.
			found, err := j.FindTraces(ctx, TraceQuery{Service: service, Since: started.Add(-time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			if ids := traceIDs(found); len(ids) != 2 || !slices.Contains(ids, traceID) || !slices.Contains(ids, otherLink.TraceID) {
				t.Errorf("FindTraces(service=%s) = %v, want %s and %s", service, ids, traceID, otherLink.TraceID)
			}
			byOp, err := j.FindTraces(ctx, TraceQuery{Service: service, Operation: "smoke.child", Since: started.Add(-time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			if len(byOp) != 1 || byOp[0].ID != traceID || len(byOp[0].Spans) != 2 {
				t.Errorf("FindTraces(operation=smoke.child) = %v, want the one trace %s whole", traceIDs(byOp), traceID)
			}
			foundV1, err := j.FindTracesV1(ctx, service, 20)
			if err != nil {
				t.Fatal(err)
			}
			if ids := traceIDs(foundV1); len(ids) != 2 || !slices.Contains(ids, traceID) {
				t.Errorf("FindTracesV1(service=%s) = %v, want 2 traces including %s", service, ids, traceID)
			}
			services, err := j.Services(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(services, service) {
				t.Errorf("services %v lack %s", services, service)
			}
		})
	}
	none, err := j.FindTraces(context.Background(), TraceQuery{Service: "no-such-service"})
	if err != nil || len(none) != 0 {
		t.Errorf("FindTraces(no-such-service) = %v, %v; want none", traceIDs(none), err)
	}
	if _, err := j.GetTrace(context.Background(), "0123456789abcdef0123456789abcdef"); err == nil {
		t.Error("GetTrace of an unknown trace id succeeded")
	}
}

// checkSmokeTrace checks the parent/child trace as the smoke test sent it.
func checkSmokeTrace(t *testing.T, api string, tr *Trace, service, parentID, childID string, link Link) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: %s\n%s", api, fmt.Sprintf(format, args...), tr.Tree())
	}
	if len(tr.Spans) != 2 {
		fail("%d spans, want 2", len(tr.Spans))
		return
	}
	p, okp := tr.Span(parentID)
	c, okc := tr.Span(childID)
	if !okp || !okc {
		fail("parent %s or child %s missing", parentID, childID)
		return
	}
	if p.ParentSpanID != "" || c.ParentSpanID != parentID {
		fail("parent's parent %q (want none), child's parent %q (want %s)", p.ParentSpanID, c.ParentSpanID, parentID)
	}
	if len(tr.Dangling()) != 0 || len(tr.Roots()) != 1 {
		fail("dangling %d, roots %d", len(tr.Dangling()), len(tr.Roots()))
	}
	if p.Name != "smoke.parent" || c.Name != "smoke.child" || p.Kind != KindServer || c.Kind != KindClient {
		fail("names/kinds %s/%d, %s/%d", p.Name, p.Kind, c.Name, c.Kind)
	}
	if p.Service != service || c.Service != service {
		fail("services %q, %q, want %q", p.Service, c.Service, service)
	}
	if len(c.Links) != 1 || c.Links[0] != link || len(p.Links) != 0 {
		fail("child's links %v (want [%v]), parent's %v (want none)", c.Links, link, p.Links)
	}
}
