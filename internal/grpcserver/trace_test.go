package grpcserver

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/baagent/baagent/internal/grpcclient"
)

// With a tracer provider every RPC is a server span, child of the caller's
// span (W3C trace context in the metadata), and its handling time carries
// the trace as an exemplar; health checks are not traced. Without one, no
// stats handler is installed.
func TestServerTracesRPCs(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	f := start(t, func(o *Options) { o.TracerProvider = tp })
	ctx := testCtx(t)

	conn, err := grpc.NewClient(f.srv.Addr().String(), append(grpcclient.TraceOptions(tp), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx, caller := tp.Tracer("test").Start(ctx, "caller")
	out := new(wrapperspb.StringValue)
	if err := conn.Invoke(cctx, echoMethod, wrapperspb.String("hi"), out); err != nil {
		t.Fatal(err)
	}
	caller.End()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	var server, client int
	for _, s := range exp.GetSpans() {
		switch {
		case s.Name == testService+"/Echo" && s.SpanKind.String() == "server":
			server++
			if s.SpanContext.TraceID() != caller.SpanContext().TraceID() {
				t.Errorf("server span in trace %s, want the caller's %s", s.SpanContext.TraceID(), caller.SpanContext().TraceID())
			}
		case s.Name == testService+"/Echo":
			client++
		case s.Name == "grpc.health.v1.Health/Check":
			t.Errorf("health check traced (%s)", s.SpanKind)
		}
	}
	if server != 1 || client != 1 {
		t.Errorf("%d server and %d client Echo spans, want 1 and 1", server, client)
	}

	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "grpc_server_handling_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				for _, l := range b.GetExemplar().GetLabel() {
					found = found || (l.GetName() == "trace_id" && l.GetValue() == caller.SpanContext().TraceID().String())
				}
			}
		}
	}
	if !found {
		t.Error("no exemplar with the caller's trace id on grpc_server_handling_seconds")
	}
}

func TestServerWithoutTracingInstallsNothing(t *testing.T) {
	if opts := grpcclient.TraceOptions(nil); len(opts) != 0 {
		t.Errorf("TraceOptions(nil) = %d options", len(opts))
	}
}
