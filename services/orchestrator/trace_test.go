package orchestrator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/baagent/baagent/core/runevent"
	baagentv1 "github.com/baagent/baagent/gen/go/baagent/v1"
	"github.com/baagent/baagent/internal/natsx"
	"github.com/baagent/baagent/internal/testkit"
	"github.com/baagent/baagent/internal/tracing"
)

// A run whose replica dies mid-run is resumed by another replica in the
// same trace: the trace context travels in the run-queue item's NATS
// headers, so the new execution's span is again a child of the span that
// started the run, and it links to the dead execution's span (named by the
// checkpoint). Every event carries the run's trace id, and the headers of
// the resumed execution's events its span context.
func TestTraceContinuesOnTheReplicaThatResumesARun(t *testing.T) {
	ctx := testCtx(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	started := make(chan struct{}, 1)
	var mu sync.Mutex
	calls := 0
	var ncA *nats.Conn
	var shared jetstream.JetStream
	h := newHarness(t, func(ctx context.Context, _ int, _ ModelRequest) (*ModelResponse, error) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first { // replica A: dies while the model thinks
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return answer("answered by replica B"), nil
	}, harnessOptions{mutate: func(o *Options) {
		o.TracerProvider = tp
		o.MaxConcurrentRuns = 1
		o.RunAckWait = time.Second
		o.Replica = "replica-a"
		// Replica A has a NATS connection of its own, which the test
		// closes to make it vanish (no heartbeat, no acknowledgement).
		shared = o.JetStream
		var err error
		if ncA, err = nats.Connect(o.JetStream.Conn().ConnectedUrl()); err != nil {
			t.Fatal(err)
		}
		if o.JetStream, err = jetstream.New(ncA); err != nil {
			t.Fatal(err)
		}
	}})

	// The caller's span: the root the run's executions hang from.
	rootCtx, root := tp.Tracer("test").Start(ctx, "client")
	resp, err := h.srv.StartRun(rootCtx, &baagentv1.OrchestratorServiceStartRunRequest{Tenant: testTenant, Spec: &baagentv1.RunSpec{Input: "one"}})
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	run := resp.GetRun()
	traceID := root.SpanContext().TraceID()
	if run.GetTraceId() != traceID.String() {
		t.Fatalf("run trace_id %q, want %s", run.GetTraceId(), traceID)
	}
	<-started
	ncA.Close() // replica A is gone

	optsB := h.opts
	optsB.JetStream, optsB.Replica, optsB.Registerer = shared, "replica-b", nil
	srvB, _ := runReplica(t, optsB)
	var final *baagentv1.Run
	testkit.Eventually(t, remaining(ctx), "run finished on replica B", func() bool {
		r, err := srvB.GetRun(ctx, &baagentv1.OrchestratorServiceGetRunRequest{Tenant: testTenant, RunId: run.GetRunId()})
		final = r.GetRun()
		return err == nil && isFinished(final.GetState())
	})
	if final.GetState() != baagentv1.RunState_RUN_STATE_COMPLETED || final.GetTraceId() != traceID.String() {
		t.Fatalf("final record %v", final)
	}

	// B's execution span ends just after the record is stored.
	var spanB tracetest.SpanStub
	testkit.Eventually(t, remaining(ctx), "run span of replica B", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "run" && s.SpanContext.TraceID() == traceID && attrOf(s, "baagent.replica") == "replica-b" {
				spanB = s
			}
		}
		return spanB.Name != ""
	})
	if spanB.Parent.SpanID() != root.SpanContext().SpanID() {
		t.Errorf("B's run span has parent %s, want the span that started the run (%s)", spanB.Parent.SpanID(), root.SpanContext().SpanID())
	}
	if len(spanB.Links) != 1 || spanB.Links[0].SpanContext.TraceID() != traceID || spanB.Links[0].SpanContext.SpanID() == spanB.SpanContext.SpanID() {
		t.Fatalf("B's run span links %v, want one to A's execution", spanB.Links)
	}
	linked := spanB.Links[0].SpanContext.SpanID()
	steps := 0
	for _, s := range exp.GetSpans() {
		if s.Name == "step" && s.Parent.SpanID() == spanB.SpanContext.SpanID() {
			steps++
		}
	}
	if steps == 0 {
		t.Error("no step span under B's execution")
	}

	// Events: the run's trace id in the envelope; the resumed execution's
	// span context in the headers of what it published.
	subject, _ := natsx.EventSubject(testTenant, run.GetRunId())
	cons, err := shared.OrderedConsumer(ctx, natsx.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	fromB := 0
	for {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		ev := &baagentv1.Event{}
		if err := proto.Unmarshal(msg.Data(), ev); err != nil {
			t.Fatal(err)
		}
		if ev.GetTraceId() != traceID.String() {
			t.Errorf("event %d (%s) trace_id %q", ev.GetSeq(), ev.GetType(), ev.GetTraceId())
		}
		sc := trace.SpanContextFromContext(tracing.Extract(context.Background(), msg.Headers()))
		if !sc.IsValid() || sc.TraceID() != traceID {
			t.Errorf("event %d (%s) headers carry span context %v", ev.GetSeq(), ev.GetType(), sc)
		}
		if sc.SpanID() == spanB.SpanContext.SpanID() {
			fromB++
		}
		if runevent.IsTerminal(ev) {
			break
		}
	}
	if fromB == 0 {
		t.Error("no event carries B's span context")
	}

	// Replica A, stopped, ends its own execution span: the one B links to.
	h.stop()
	for _, s := range exp.GetSpans() {
		if s.SpanContext.SpanID() == linked {
			if s.Name != "run" || attrOf(s, "baagent.replica") != "replica-a" || s.Parent.SpanID() != root.SpanContext().SpanID() {
				t.Errorf("linked span %q replica %q parent %s", s.Name, attrOf(s, "baagent.replica"), s.Parent.SpanID())
			}
			return
		}
	}
	t.Error("the span B links to is not A's execution span")
}

func attrOf(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
